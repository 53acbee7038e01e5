"""What EC2 does to fresh instances that moto does not: eventual consistency, pending, tokens.

Modelled on the EC2 API reference, "Eventual consistency in the Amazon EC2 API"
(docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html) and "Ensuring
idempotency" (.../ec2-api-idempotency.html):

- for a short while after RunInstances returns, a DescribeInstances or CreateTags naming a
  new instance id answers `InvalidInstanceID.NotFound`, and a DescribeInstances by filter
  (tags, states) does not list it yet;
- a new instance is `pending` (code 0) before it is `running` (code 16);
- RunInstances with a ClientToken already used answers with the instances of the first call
  (nothing new is made); the same token with other parameters is refused with
  `IdempotentParameterMismatch`;
- security groups, key pairs and volumes are eventually consistent too: for a short while after
  CreateSecurityGroup, ImportKeyPair/CreateKeyPair or CreateVolume, a call naming the new one
  (AuthorizeSecurityGroupIngress, RunInstances' SecurityGroupId/KeyName, DescribeKeyPairs,
  AttachVolume, CreateTags...) answers `InvalidGroup.NotFound`, `InvalidKeyPair.NotFound` or
  `InvalidVolume.NotFound`.

moto makes instances `running` at once, lists them everywhere at once and ignores ClientToken;
the lab's front puts these behaviours in front of it for every spotrun process.
"""

from __future__ import annotations

import re
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

EC2_NS_2013 = "http://ec2.amazonaws.com/doc/2013-10-15/"
_INSTANCE_ID = re.compile(r"<instanceId>(i-[0-9a-f]+)</instanceId>")
# RunInstances parameters that do not make a request different (botocore signs each call anew)
_VOLATILE = ("ClientToken", "Version", "DryRun")

# The calls that make a resource, its kind, and where its id (or, for a key pair, name) is.
_MADE_BY = {
    "CreateSecurityGroup": ("group", re.compile(r"<groupId>(sg-[0-9a-f]+)</groupId>")),
    "ImportKeyPair": ("key", re.compile(r"<keyName>([^<]+)</keyName>")),
    "CreateKeyPair": ("key", re.compile(r"<keyName>([^<]+)</keyName>")),
    "CreateVolume": ("volume", re.compile(r"<volumeId>(vol-[0-9a-f]+)</volumeId>")),
}
# The parameters that name a resource of each kind (a key pair's name is also a group's, so
# which parameter carries a value matters), and EC2's error for one it does not know yet.
_NAMED_BY = {
    "group": re.compile(
        r"(GroupId|GroupId\.\d+|SecurityGroupId\.\d+|NetworkInterface\.\d+\.SecurityGroupId\.\d+"
        r"|ResourceId\.\d+)"
    ),
    "key": re.compile(r"KeyName(\.\d+)?"),
    "volume": re.compile(r"(VolumeId|VolumeId\.\d+|ResourceId\.\d+)"),
}
_NOT_FOUND = {
    "group": ("InvalidGroup.NotFound", "The security group '{}' does not exist"),
    "key": ("InvalidKeyPair.NotFound", "The key pair '{}' does not exist"),
    "volume": ("InvalidVolume.NotFound", "The volume '{}' does not exist."),
}
# The state an ending call passes through (its name and code), and the state it ends in.
_TRANSITIONAL = {
    "TerminateInstances": ("shutting-down", "32"),
    "StopInstances": ("stopping", "64"),
}
_TRANSITIONAL_OF = {"shutting-down": ("terminated", "32"), "stopping": ("stopped", "64")}
# Calls that name a fresh resource without EC2 looking it up (deleting a key pair never fails)
_UNCHECKED = {"DeleteKeyPair", *_MADE_BY}


@dataclass
class Consistency:
    """The behaviours, with their windows in seconds (0 switches one off)."""

    not_found_s: float = 0.0  # describe/tag by id answers NotFound; filters leave it out
    pending_s: float = 0.0  # described as pending
    tokens: bool = True  # ClientToken idempotency
    born: dict[str, float] = field(default_factory=dict)  # instance id -> monotonic time made
    first_answers: dict[str, tuple[tuple[tuple[str, str], ...], bytes]] = field(
        default_factory=dict
    )  # ClientToken -> (the request's parameters, RunInstances' answer)
    not_found_answers: int = 0  # how often a fresh id was answered NotFound (tests look)
    repeats: int = 0  # RunInstances answered from a token's first call
    # security groups, key pairs, volumes: NotFound for this long after they were made
    resource_not_found_s: float = 0.0
    resources_born: dict[str, tuple[str, float]] = field(default_factory=dict)  # id -> kind, when
    # (action, the error code) of every NotFound answered for a fresh resource (tests look)
    resource_not_found: list[tuple[str, str]] = field(default_factory=list)
    # transitional states: shutting-down before terminated, stopping before stopped
    shutting_down_s: float = 0.0
    stopping_s: float = 0.0
    ending: dict[str, tuple[str, float]] = field(default_factory=dict)  # id -> call, when
    transitional_answers: int = 0  # instances described shutting-down or stopping (tests look)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------ tokens
    @staticmethod
    def _signature(params: dict[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((k, v) for k, v in params.items() if k not in _VOLATILE))

    def repeat_of(self, params: dict[str, str]) -> tuple[bool, bytes] | None:
        """For a RunInstances whose token was used: (same request?, the first answer)."""
        token = params.get("ClientToken")
        if not self.tokens or not token:
            return None
        with self._lock:
            first = self.first_answers.get(token)
            if first is None:
                return None
            self.repeats += 1
        return first[0] == self._signature(params), first[1]

    def made(self, params: dict[str, str], answer: bytes) -> None:
        """RunInstances went through: its instances are fresh from now, its token is used."""
        now = time.monotonic()
        ids = _INSTANCE_ID.findall(answer.decode(errors="replace"))
        with self._lock:
            for instance_id in ids:
                self.born[instance_id] = now
            token = params.get("ClientToken")
            if token and ids:
                self.first_answers.setdefault(token, (self._signature(params), answer))

    # -------------------------------------------------- other resources
    def made_resource(self, action: str, answer: bytes) -> None:
        """A security group, key pair or volume was made: unknown for a while from now."""
        made = _MADE_BY.get(action)
        if made is None or self.resource_not_found_s <= 0:
            return
        kind, pattern = made
        found = pattern.search(answer.decode(errors="replace"))
        if found is not None:
            with self._lock:
                self.resources_born[found.group(1)] = (kind, time.monotonic())

    def resource_unknown_yet(self, action: str, params: dict[str, str]) -> tuple[int, bytes] | None:
        """EC2's NotFound when the call names a resource made a moment ago, else None."""
        if action in _UNCHECKED:
            return None
        now = time.monotonic()
        with self._lock:
            for key, value in params.items():
                born = self.resources_born.get(value)
                if born is None or now - born[1] >= self.resource_not_found_s:
                    continue
                kind = born[0]
                if _NAMED_BY[kind].fullmatch(key):
                    code, message = _NOT_FOUND[kind]
                    self.resource_not_found.append((action, code))
                    return 400, _error_xml(code, message.format(value))
        return None

    # ------------------------------------------------- transitional states
    def ended_by(self, action: str, ids: list[str]) -> None:
        """TerminateInstances or StopInstances went through for `ids`: described as on their
        way (shutting-down, stopping) for a while from now."""
        now = time.monotonic()
        with self._lock:
            for instance_id in ids:
                self.ending.setdefault(instance_id, (action, now))

    def _on_the_way(self) -> dict[str, str]:
        """id -> the transitional state it is described in now."""
        now = time.monotonic()
        windows = {"TerminateInstances": self.shutting_down_s, "StopInstances": self.stopping_s}
        return {
            i: _TRANSITIONAL[action][0]
            for i, (action, at) in self.ending.items()
            if now - at < windows.get(action, 0.0)
        }

    # ------------------------------------------------------------- reads
    def _age(self, instance_id: str) -> float | None:
        born = self.born.get(instance_id)
        return None if born is None else time.monotonic() - born

    def unknown_yet(self, ids: list[str]) -> list[str]:
        """Those of `ids` EC2 does not answer for yet."""
        with self._lock:
            fresh = [i for i in ids if (age := self._age(i)) is not None and age < self.not_found_s]
            if fresh:
                self.not_found_answers += 1
            return fresh

    def rewrite_describe(self, answer: bytes, by_filter: bool) -> bytes:
        """DescribeInstances' answer as EC2 would give it now: fresh instances left out of a
        filtered listing, young ones pending."""
        with self._lock:
            hidden = {
                i
                for i in self.born
                if by_filter and (age := self._age(i)) is not None and age < self.not_found_s
            }
            young = {
                i for i in self.born if (age := self._age(i)) is not None and age < self.pending_s
            }
            on_the_way = self._on_the_way()
        text = answer.decode(errors="replace")
        present = set(_INSTANCE_ID.findall(text))
        if not (present & (hidden | young | set(on_the_way))):
            return answer
        ET.register_namespace("", _namespace(text))
        root = ET.fromstring(answer)
        for reservations in root.iter():
            if _local(reservations.tag) != "reservationSet":
                continue
            for reservation in list(reservations):
                self.transitional_answers += _rewrite_reservation(
                    reservation, hidden, young, on_the_way
                )
                if not _instances_of(reservation):
                    reservations.remove(reservation)
        rewritten: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
        return rewritten


def _rewrite_reservation(
    reservation: ET.Element, hidden: set[str], young: set[str], on_the_way: dict[str, str]
) -> int:
    """Rewrite one reservation's instances; how many were described as on their way out."""
    transitional = 0
    for instances in reservation:
        if _local(instances.tag) != "instancesSet":
            continue
        for item in list(instances):
            instance_id = _child_text(item, "instanceId")
            if instance_id in hidden:
                instances.remove(item)
            elif instance_id in young:
                _pending_if_running(item)
            if instance_id in on_the_way:
                transitional += _on_the_way_if_ended(item, on_the_way[instance_id])
    return transitional


def _on_the_way_if_ended(item: ET.Element, transitional: str) -> int:
    # moto ends an instance at once; EC2 shows the state on the way there for a while
    for state in item:
        if _local(state.tag) != "instanceState":
            continue
        parts = {_local(part.tag): part for part in state}
        name, code = _TRANSITIONAL_OF[transitional]
        if "name" in parts and parts["name"].text == name:
            parts["name"].text = transitional
            if "code" in parts:
                parts["code"].text = code
            return 1
    return 0


def _pending_if_running(item: ET.Element) -> None:
    # Only a running instance was pending a moment ago; one already ending stays as it is.
    for state in item:
        if _local(state.tag) != "instanceState":
            continue
        parts = {_local(part.tag): part for part in state}
        if "name" in parts and parts["name"].text == "running":
            parts["name"].text = "pending"
            if "code" in parts:
                parts["code"].text = "0"


def _instances_of(reservation: ET.Element) -> list[ET.Element]:
    return [
        item
        for instances in reservation
        if _local(instances.tag) == "instancesSet"
        for item in instances
    ]


def _child_text(node: ET.Element, name: str) -> str | None:
    for child in node:
        if _local(child.tag) == name:
            return child.text
    return None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _namespace(text: str) -> str:
    found = re.search(r'xmlns="([^"]+)"', text)
    return found.group(1) if found else EC2_NS_2013


def ids_named(params: dict[str, str], prefix: str) -> list[str]:
    """The ids a query names as PREFIX.1, PREFIX.2, ... (InstanceId.N, ResourceId.N)."""
    return [v for k, v in params.items() if k.startswith(prefix + ".") and v.startswith("i-")]


def not_found_error(ids: list[str]) -> tuple[int, bytes]:
    """EC2's answer for ids it does not know (yet)."""
    if len(ids) == 1:
        message = f"The instance ID '{ids[0]}' does not exist"
    else:
        message = f"The instance IDs '{', '.join(ids)}' do not exist"
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<Response><Errors><Error><Code>InvalidInstanceID.NotFound</Code>"
        f"<Message>{message}</Message></Error></Errors>"
        "<RequestID>lab-consistency</RequestID></Response>"
    )
    return 400, body.encode()


def _error_xml(code: str, message: str) -> bytes:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error>"
        "</Errors><RequestID>lab-consistency</RequestID></Response>"
    )
    return body.encode()


def mismatch_error() -> tuple[int, bytes]:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        "<Response><Errors><Error><Code>IdempotentParameterMismatch</Code>"
        "<Message>The client token you have provided is associated with a resource that is "
        "already deleted or has different parameters. Please use a different client token."
        "</Message></Error></Errors><RequestID>lab-consistency</RequestID></Response>"
    )
    return 400, body.encode()
