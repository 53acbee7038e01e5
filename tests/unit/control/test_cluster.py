"""Multi-node pieces that need no lab: node order, torchrun's command line, the environment,
the node-rank check, RunInstances parameters for a cluster, instance type facts."""

from __future__ import annotations

from dataclasses import replace

from spotrun.cloud.aws.instances import Image, run_instances_params
from spotrun.cloud.aws.offers import InstanceType
from spotrun.cloud.base import Offer
from spotrun.control import cluster
from spotrun.core import node_order
from tests.unit.cluster_nodes import node_instance

OFFER = Offer(
    provider="aws",
    instance_type="p4d.24xlarge",
    region="us-east-1",
    zone="us-east-1a",
    gpus=8,
    gpu_model="A100",
    gpu_memory_gb=40.0,
    vcpus=96,
    memory_gb=1152.0,
    spot_usd_per_hour=11.8,
    on_demand_usd_per_hour=32.77,
    efa=True,
)


def test_torchrun_on_each_node_meets_at_node_0() -> None:
    nodes = node_order.order([node_instance("i-a", "10.0.0.5"), node_instance("i-b", "10.0.0.7")])
    spec = cluster.ClusterSpec("r1", nodes, procs_per_node=8, port=29400, efa=True)
    head = spec.torchrun_argv("/venv/bin/python", 0, ["-m", "spotrun", "train", "x"])
    other = spec.torchrun_argv("/venv/bin/python", 1, ["-m", "spotrun", "train", "x"])
    assert head[:3] == ["/venv/bin/python", "-m", "torch.distributed.run"]
    for argv in (head, other):
        assert "--nnodes=2" in argv and "--nproc-per-node=8" in argv
        assert "--rdzv-backend=c10d" in argv and "--rdzv-endpoint=10.0.0.5:29400" in argv
        assert "--rdzv-id=r1" in argv and argv[-4:] == ["-m", "spotrun", "train", "x"]
    assert "--rdzv-conf=is_host=1" in head and "--local-addr=10.0.0.5" in head
    assert "--rdzv-conf=is_host=0" in other and "--local-addr=10.0.0.7" in other


def test_nccl_settings_are_spotruns_and_overridable() -> None:
    nodes = [node_instance("i-a", "10.0.0.5"), node_instance("i-b", "10.0.0.7")]
    efa = cluster.ClusterSpec("r1", nodes, 8, 29400, efa=True)
    env = efa.env(1, {"NCCL_DEBUG": "INFO", "FI_PROVIDER": "tcp"})
    assert env["SPOTRUN_NODE_RANK"] == "1" and env["SPOTRUN_NNODES"] == "2"
    assert env["SPOTRUN_MASTER_ADDR"] == "10.0.0.5"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["FI_PROVIDER"] == "tcp"  # overridden
    assert env["NCCL_DEBUG"] == "INFO"
    assert env["SPOTRUN_TORCHRUN_ARGS"].split() == efa.rendezvous_args(1)  # for your own code
    assert "--rdzv-conf=is_host=0" in env["SPOTRUN_TORCHRUN_ARGS"]
    plain = cluster.ClusterSpec("r1", nodes, 1, 29400, efa=False).env(0, {})
    assert "FI_PROVIDER" not in plain and plain["NCCL_SOCKET_IFNAME"] == "^lo,docker"


def _params(offer: Offer, **kwargs: object) -> dict[str, object]:
    return run_instances_params(
        run_id="r1",
        offer=offer,
        count=2,
        image=Image("ami-1", "/dev/sda1", "x86_64", "test"),
        subnet_id="subnet-1",
        security_group_id="sg-1",
        key_name="k",
        disk_gb=100,
        tags=[],
        token="t",
        public_address=False,
        instance_profile=None,
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_cluster_request_names_its_placement_group_and_an_efa_interface() -> None:
    params = _params(OFFER, placement_group="spotrun-r1-us-east-1a", efa=True)
    assert params["Placement"] == {
        "GroupName": "spotrun-r1-us-east-1a",
        "AvailabilityZone": "us-east-1a",
    }
    (interface,) = params["NetworkInterfaces"]  # type: ignore[misc]
    assert interface["InterfaceType"] == "efa" and interface["SubnetId"] == "subnet-1"
    assert "AssociatePublicIpAddress" not in interface and "SubnetId" not in params
    single = _params(replace(OFFER, efa=False))
    assert "Placement" not in single and single["SubnetId"] == "subnet-1"
    assert "NetworkInterfaces" not in single


def test_instance_types_say_whether_they_join_a_cluster_group_and_have_efa() -> None:
    p4d = InstanceType.from_api(
        {
            "InstanceType": "p4d.24xlarge",
            "PlacementGroupInfo": {"SupportedStrategies": ["cluster", "partition", "spread"]},
            "NetworkInfo": {"EfaSupported": True},
        }
    )
    t3 = InstanceType.from_api(
        {
            "InstanceType": "t3.micro",
            "PlacementGroupInfo": {"SupportedStrategies": ["partition", "spread"]},
            "NetworkInfo": {"EfaSupported": False},
        }
    )
    assert (p4d.cluster_placement, p4d.efa) == (True, True)
    assert (t3.cluster_placement, t3.efa) == (False, False)
    assert Offer.from_dict(OFFER.to_dict()) == OFFER  # stored with the run's plan


def test_the_vcpu_quota_asked_for_a_cluster_is_its_familys() -> None:
    from spotrun.cloud.aws.quotas import quota_code

    assert quota_code("c6i.large", spot=True) == "L-34B43A08"
    assert quota_code("g5.12xlarge", spot=True) == "L-3819A6DF"
    assert quota_code("p4d.24xlarge", spot=True) == "L-7212CCBC"
    assert quota_code("p4d.24xlarge", spot=False) == "L-417A185B"
    assert quota_code("p5.48xlarge", spot=True) == "L-C4BD4855"  # All P5 Spot Instance Requests
    assert quota_code("p6-b200.48xlarge", spot=True) is None  # no code of its own: EC2 decides
