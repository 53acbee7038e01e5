"""IAM in the lab: the front authorizes every request as IAM would, before moto sees it.

moto can enforce IAM itself (INITIAL_NO_AUTH_ACTION_COUNT), but its evaluator turns an Allow
statement whose Condition it cannot evaluate into an explicit deny, and it knows no resource
tags, so spotrun's policy (ending calls allowed only on resources tagged spotrun:run-id; an
instance may terminate only itself) cannot be expressed to it. The lab keeps IAM here instead,
with the policies of spotrun/cloud/aws/policy.py, the same ones the README prints.

Modelled (IAM policy evaluation logic, "Policy evaluation logic" in the IAM User Guide):
identity by access key id (the user's keys, each instance's role session); explicit Deny wins,
else some Allow must match action and resource, with Action/NotAction and Resource wildcards,
the StringLike/StringEquals condition operators on aws:ResourceTag/<key> (the tags of the EC2
resource named in the request: TerminateInstances, StopInstances, StartInstances and the
Delete* calls), the ${ec2:InstanceID} policy variable of a role session,
iam:PassRole on RunInstances with an instance profile, and ec2:CreateTags for a call that tags
what it creates (TagSpecification: EC2 User Guide, "Grant permission to tag Amazon EC2
resources during creation"). Errors are the services' own: EC2's
UnauthorizedOperation (403), S3's AccessDenied (403), the JSON services' AccessDeniedException
and AuthFailure / InvalidAccessKeyId for keys IAM does not know. Not modelled: signatures are
not verified (a key id names its identity), permission boundaries, SCPs, session policies,
resource-based policies, condition keys other than the above.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape, unescape

ACCOUNT = "123456789012"

# The EC2 actions whose resources a policy may name (and carry tags): the parameter naming
# them, and the ARN's resource type. Other EC2 actions are authorized against "*".
EC2_RESOURCES = {
    "TerminateInstances": ("InstanceId", "instance"),
    "StopInstances": ("InstanceId", "instance"),
    "StartInstances": ("InstanceId", "instance"),
    "DeleteVolume": ("VolumeId", "volume"),
    "DeleteSecurityGroup": ("GroupId", "security-group"),
    "RevokeSecurityGroupIngress": ("GroupId", "security-group"),
    "DeleteKeyPair": ("KeyName", "key-pair"),
    "CancelSpotInstanceRequests": ("SpotInstanceRequestId", "spot-instances-request"),
    "DeletePlacementGroup": ("GroupName", "placement-group"),
}

# (region, resource type, id) -> that resource's tags, or None when EC2 has no such resource
# there (the call then goes on, and EC2's NotFound answers it). The lab asks moto, or the
# front's placement groups.
TagLookup = Callable[[str, str, str], "dict[str, str] | None"]


@dataclass(frozen=True)
class Identity:
    arn: str
    policies: tuple[dict[str, Any], ...]
    instance_id: str | None = None  # a role session's instance: ${ec2:InstanceID}


@dataclass(frozen=True)
class Resource:
    arn: str
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Ask:
    """One request as IAM sees it: who, which service protocol, the action, its resources."""

    key_id: str
    region: str  # the one the request is signed for
    service: str
    action: str  # "ec2:TerminateInstances"
    resources: tuple[Resource, ...]
    passes_role: str | None = None  # the role ARN a RunInstances hands to its instance
    head: bool = False  # a HEAD request: errors carry no body
    tags_on_create: bool = False  # TagSpecification given: ec2:CreateTags is needed too


class Iam:
    """The identities the lab made, and the decision on each request the front receives."""

    def __init__(self, tags_of: TagLookup) -> None:
        self.tags_of = tags_of
        # S3 answers NoSuchBucket (404) for a bucket that does not exist, whoever asks
        self.bucket_exists: Callable[[str], bool] = lambda bucket: True
        self.identities: dict[str, Identity] = {}
        self.profiles: dict[str, str] = {}  # instance profile name -> its role's ARN
        self.enabled = True
        self.denied: list[str] = []  # "arn action resource", for tests to show what failed
        self._lock = threading.Lock()

    def add(self, key_id: str, identity: Identity) -> None:
        with self._lock:
            self.identities[key_id] = identity

    def forget(self, key_id: str) -> None:
        with self._lock:
            self.identities.pop(key_id, None)

    # ------------------------------------------------------------------ deciding
    def refusal(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes] | None:
        """The service's error answer when IAM refuses this request, None when it may go on."""
        if not self.enabled:
            return None
        ask = self._ask(method, path, headers, body)
        if ask is None:
            return None
        with self._lock:
            identity = self.identities.get(ask.key_id)
        if identity is None:
            return _unknown_key(ask)
        if ask.action == "sts:GetCallerIdentity":  # always allowed; moto knows not whose key
            return _caller_identity(identity, ask.key_id)
        for resource in ask.resources:
            if not allowed(identity, ask.action, resource):
                if (
                    ask.service == "s3"
                    and ask.action != "s3:CreateBucket"
                    and not self.bucket_exists(_bucket_of(resource.arn))
                ):
                    return None  # moto's NoSuchBucket is S3's answer
                return self._deny(identity, ask, ask.action, resource.arn)
        if ask.passes_role and not allowed(identity, "iam:PassRole", Resource(ask.passes_role)):
            return self._deny(identity, ask, "iam:PassRole", ask.passes_role)
        if ask.tags_on_create and not allowed(identity, "ec2:CreateTags", Resource("*")):
            return self._deny(identity, ask, "ec2:CreateTags", "*")
        return None

    def _deny(
        self, identity: Identity, ask: Ask, action: str, resource: str
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        self.denied.append(f"{identity.arn} {action} {resource}")
        message = (
            f"User: {identity.arn} is not authorized to perform: {action} on resource: "
            f"{resource} because no identity-based policy allows the {action} action"
        )
        return _error(ask.service, "AccessDenied", message, method_is_head=ask.head)

    def _ask(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Ask | None:
        parts = urlsplit(path)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        scope = _credential_scope(headers, query)
        if scope is None:
            return None  # unsigned (checkip, the lab's own pages): not an AWS call
        key_id, region, service = scope
        target = headers.get("X-Amz-Target", "")
        if service == "s3":
            action, arn = _s3_action(method, parts.path, query)
            arns = [arn]
            if action == "s3:DeleteObject" and arn.endswith("/*"):  # DeleteObjects: each key
                keys = re.findall(r"<Key>(.*?)</Key>", body.decode(errors="replace"), flags=re.S)
                arns = [arn[:-1] + unescape(key) for key in keys] or arns
            named = tuple(Resource(a) for a in arns)
            return Ask(key_id, region, service, action, named, head=method == "HEAD")
        if target:  # JSON protocol: "AmazonSSM.GetParameter"
            action = f"{service}:{target.split('.')[-1]}"
            return Ask(key_id, region, service, action, (Resource("*"),))
        params = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
        params.update(query)
        name = params.get("Action", "")
        if not name:
            # No action named (a request cut short: its sender was killed while sending it).
            # AWS answers MissingAction before any authorization; so does the service here.
            return None
        action = f"{service}:{name}"
        resources: tuple[Resource, ...] = (Resource("*"),)
        passes_role = None
        if service == "ec2" and name in EC2_RESOURCES:
            resources = self._ec2_resources(region, name, params)
        if service == "ec2" and name == "RunInstances":  # DryRun checks PassRole too
            profile = (
                params.get("IamInstanceProfile.Name")
                or params.get("IamInstanceProfile.Arn", "").rsplit("/", 1)[-1]
            )
            if profile:
                passes_role = self.profiles.get(profile, f"arn:aws:iam::{ACCOUNT}:role/{profile}")
        tagging = service == "ec2" and any(k.startswith("TagSpecification.") for k in params)
        return Ask(key_id, region, service, action, resources, passes_role, tags_on_create=tagging)

    def _ec2_resources(
        self, region: str, name: str, params: dict[str, str]
    ) -> tuple[Resource, ...]:
        param, kind = EC2_RESOURCES[name]
        ids = [v for k, v in params.items() if k == param or re.fullmatch(rf"{param}\.\d+", k)]
        if name == "DeleteKeyPair" and not ids and params.get("KeyPairId"):
            ids = [params["KeyPairId"]]
        found = []
        for resource_id in ids:
            tags = self.tags_of(region, kind, resource_id)
            if tags is not None:  # unknown ids: EC2's NotFound is the answer, not IAM's
                found.append(Resource(f"arn:aws:ec2:{region}:{ACCOUNT}:{kind}/{resource_id}", tags))
        return tuple(found)


# ---------------------------------------------------------------------- evaluation
def allowed(identity: Identity, action: str, resource: Resource) -> bool:
    """IAM's rule for identity policies: an explicit Deny wins; else some Allow must match."""
    verdicts = [
        statement["Effect"]
        for policy in identity.policies
        for statement in _statements(policy)
        if _applies(statement, identity, action, resource)
    ]
    return "Deny" not in verdicts and "Allow" in verdicts


def _statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    found = policy.get("Statement", [])
    return [found] if isinstance(found, dict) else list(found)


def _listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _glob(pattern: str, value: str) -> bool:
    # IAM's wildcards: * any run of characters, ? one; matching is case-insensitive for actions
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value) is not None


def _applies(
    statement: dict[str, Any], identity: Identity, action: str, resource: Resource
) -> bool:
    if "NotAction" in statement:
        if any(_glob(p.lower(), action.lower()) for p in _listed(statement["NotAction"])):
            return False
    elif not any(_glob(p.lower(), action.lower()) for p in _listed(statement.get("Action"))):
        return False
    patterns = [_substitute(p, identity) for p in _listed(statement.get("Resource"))]
    if not any(p is not None and _glob(p, resource.arn) for p in patterns):
        return False
    return _conditions_hold(statement.get("Condition", {}), resource)


def _substitute(pattern: str, identity: Identity) -> str | None:
    """A Resource with its policy variables filled in; None when one has no value here."""
    if "${ec2:InstanceID}" in pattern:
        if identity.instance_id is None:
            return None
        pattern = pattern.replace("${ec2:InstanceID}", identity.instance_id)
    return None if "${" in pattern else pattern


def _conditions_hold(conditions: dict[str, Any], resource: Resource) -> bool:
    for operator, tests in conditions.items():
        for key, expected in tests.items():
            if not key.startswith("aws:ResourceTag/"):
                return False  # a condition key the lab does not know: never met
            actual = resource.tags.get(key.split("/", 1)[1])
            if actual is None:
                return False
            if operator == "StringLike":
                met = any(_glob(p, actual) for p in _listed(expected))
            elif operator == "StringEquals":
                met = actual in _listed(expected)
            else:
                return False
            if not met:
                return False
    return True


# ---------------------------------------------------------------------- requests
def _credential_scope(
    headers: dict[str, str], query: dict[str, str]
) -> tuple[str, str, str] | None:
    """(access key id, region, service) from a SigV4 Authorization header or a presigned URL."""
    authorization = headers.get("Authorization", "")
    if "Credential=" in authorization:
        scope = authorization.split("Credential=", 1)[1].split(",", 1)[0]
    elif "X-Amz-Credential" in query:
        scope = unquote(query["X-Amz-Credential"])
    else:
        return None
    parts = scope.split("/")
    return (parts[0], parts[2], parts[3]) if len(parts) > 3 else None


def _bucket_of(arn: str) -> str:
    return arn.removeprefix("arn:aws:s3:::").split("/", 1)[0]


def _s3_action(method: str, path: str, query: dict[str, str]) -> tuple[str, str]:
    """The IAM action and resource ARN of a path-style S3 request (the lab's endpoint is an IP)."""
    bucket, _, key = unquote(path).lstrip("/").partition("/")
    if key:
        arn = f"arn:aws:s3:::{bucket}/{key}"
        if method in ("GET", "HEAD"):
            return "s3:GetObject", arn
        if method == "DELETE":
            return ("s3:AbortMultipartUpload" if "uploadId" in query else "s3:DeleteObject"), arn
        return "s3:PutObject", arn  # PUT, and POST of multipart uploads
    arn = f"arn:aws:s3:::{bucket}"
    if method == "GET" and "location" in query:
        return "s3:GetBucketLocation", arn
    if method == "GET" and "uploads" in query:
        return "s3:ListBucketMultipartUploads", arn
    if method in ("GET", "HEAD"):
        return "s3:ListBucket", arn
    if method == "PUT":
        return "s3:CreateBucket", arn
    if method == "POST" and "delete" in query:
        return "s3:DeleteObject", arn + "/*"
    return f"s3:{method.title()}Bucket", arn


def _error(
    service: str, code: str, message: str, *, method_is_head: bool
) -> tuple[int, list[tuple[str, str]], bytes]:
    request_id = str(uuid.uuid4())
    if service == "ec2":
        code = "UnauthorizedOperation" if code == "AccessDenied" else code
        status = 401 if code == "AuthFailure" else 403
        payload = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            f"<Code>{code}</Code><Message>{escape(message)}</Message></Error></Errors>"
            f"<RequestID>{request_id}</RequestID></Response>"
        ).encode()
        return status, [("Content-Type", "text/xml")], payload
    if service == "s3":
        payload = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
            f"<Code>{code}</Code><Message>{escape(message)}</Message>"
            f"<RequestId>{request_id}</RequestId></Error>"
        ).encode()
        return 403, [("Content-Type", "application/xml")], b"" if method_is_head else payload
    if service in ("ssm", "pricing", "servicequotas"):
        kind = "AccessDeniedException" if code == "AccessDenied" else "UnrecognizedClientException"
        payload = json.dumps({"__type": kind, "message": message}).encode()
        return 400, [("Content-Type", "application/x-amz-json-1.1")], payload
    payload = (
        "<ErrorResponse><Error><Type>Sender</Type>"
        f"<Code>{code}</Code><Message>{escape(message)}</Message></Error>"
        f"<RequestId>{request_id}</RequestId></ErrorResponse>"
    ).encode()
    return 403, [("Content-Type", "text/xml")], payload


def _caller_identity(identity: Identity, key_id: str) -> tuple[int, list[tuple[str, str]], bytes]:
    payload = (
        '<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
        f"<GetCallerIdentityResult><Arn>{escape(identity.arn)}</Arn>"
        f"<UserId>{escape(key_id)}</UserId><Account>{ACCOUNT}</Account>"
        "</GetCallerIdentityResult><ResponseMetadata>"
        f"<RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata></GetCallerIdentityResponse>"
    ).encode()
    return 200, [("Content-Type", "text/xml")], payload


def _unknown_key(ask: Ask) -> tuple[int, list[tuple[str, str]], bytes]:
    if ask.service == "ec2":  # EC2 answers AuthFailure for a key it does not know
        return _error(
            "ec2",
            "AuthFailure",
            "AWS was not able to validate the provided access credentials",
            method_is_head=False,
        )
    if ask.service == "s3":
        return _error(
            "s3",
            "InvalidAccessKeyId",
            "The AWS Access Key Id you provided does not exist in our records.",
            method_is_head=ask.head,
        )
    return _error(
        ask.service,
        "InvalidClientTokenId",
        "The security token included in the request is invalid.",
        method_is_head=False,
    )
