"""What a recipe is: a typed, complete description of one training job and its stated result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from spotrun.config import Resources, StrictModel


class Target(StrictModel):
    """The result a recipe aims at: time and cost to reach it are what DAWNBench measured."""

    metric: str = "test_acc"
    value: float
    mode: Literal["max", "min"] = "max"

    def reached(self, metrics: dict[str, Any]) -> bool:
        got = metrics.get(self.metric)
        if not isinstance(got, (int, float)):
            return False
        return got >= self.value if self.mode == "max" else got <= self.value


class Recipe(StrictModel):
    name: str
    description: str = Field(description="one line: what it trains and how")
    result: str = Field(description="the result it was measured to reach, in words")
    measured_with: str = Field(description="the command that measured the result")
    target: Target | None = None
    resources: Resources = Field(default_factory=Resources)
    multi_node: bool = Field(True, description="False: the recipe refuses --nodes above 1")

    data: str = Field(description="'digits', or a folder / URL holding the data set")
    model: str
    model_options: dict[str, Any] = Field(default_factory=dict)
    num_classes: int = Field(10, ge=2)

    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=1, description="per process")
    optimizer: Literal["sgd", "adamw"] = "sgd"
    lr: float = Field(gt=0, description="peak learning rate")
    momentum: float = Field(0.9, ge=0, lt=1)
    nesterov: bool = True
    weight_decay: float = Field(5e-4, ge=0)
    seed: int = 0
    eval_every_epochs: int = Field(1, ge=1)
    checkpoint_every_steps: int | None = Field(None, ge=1, description="also at every epoch end")
    threads: int | None = Field(None, ge=1, description="torch CPU threads; None = torch default")

    methods: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="speed-up method name -> its options"
    )

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "result": self.result}
