"""spotrun's typer classes: every command group and command of the CLI is made from these.

They differ from typer's own in two things. The -h/--help flag defaults to False: typer leaves
that default unset, and coerces the unset value through a pydantic TypeAdapter, so every
command without --help paid pydantic's import (60-90 ms here) before doing anything. And the
root's commands are lazy (LazyGroup, click's lazy-group pattern): the root knows each one's
name and summary, and imports its module only when that command runs or shows its help, so a
command module imports what it needs at its top without slowing the other commands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import CommandFunctionType, CommandInfo, TyperInfo

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import Command, Context, HelpFormatter, Parameter
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import Command, Context, HelpFormatter, Parameter  # type: ignore[assignment]

try:  # typer >= 0.20 coerces every parameter through pydantic
    from spotrun.cli.typer_values import plain_values_without_pydantic
except ImportError:  # pragma: no cover - older typer coerces through click's types

    def plain_values_without_pydantic(params: list[Parameter]) -> None:
        return None


def _help_flag_off_by_default(option: TyperOption | None) -> TyperOption | None:
    # a bool flag whose value is already a bool skips typer's coercion (and pydantic)
    if option is not None and option.default is None:
        option.default = False
    return option


class SpotrunCommand(TyperCommand):
    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        plain_values_without_pydantic(self.params)

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        return _help_flag_off_by_default(super().get_help_option(ctx))


class SpotrunGroup(TyperGroup):
    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        plain_values_without_pydantic(self.params)

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        return _help_flag_off_by_default(super().get_help_option(ctx))


class SpotrunTyper(typer.Typer):
    """typer.Typer whose groups and commands are SpotrunGroup and SpotrunCommand."""

    def __init__(self, *, cls: type[TyperGroup] = SpotrunGroup, **options: Any) -> None:
        super().__init__(cls=cls, **options)

    def command(  # type: ignore[override]
        self, name: str | None = None, *, cls: type[TyperCommand] = SpotrunCommand, **options: Any
    ) -> Callable[[CommandFunctionType], CommandFunctionType]:
        return super().command(name, cls=cls, **options)


@dataclass(frozen=True)
class LazyCommand:
    """A command known by its name and summary; its module is imported when it is used.

    `target` is "module:attribute", a command function or a SpotrunTyper of subcommands;
    `summary` is the first sentence of its help, what the root's help lists
    (tests/unit/cli/test_lazy_commands.py holds it to the command's own help)."""

    name: str
    target: str
    summary: str

    def load(self) -> Command:
        module_name, _, attribute = self.target.partition(":")
        # through builtins.__import__, as `from module import attribute` goes: an import hook
        # (tests/e2e/test_launch_interrupt_early.py's Ctrl-C at this moment) sees it
        try:
            found = getattr(__import__(module_name, fromlist=[attribute]), attribute)
        except KeyboardInterrupt as interrupt:
            # typer ends a Ctrl-C inside a command silently (exit 130); this one came before
            # the command's body began, and main.py's _run says what it left: nothing
            raise typer.Abort() from interrupt
        if isinstance(found, typer.Typer):
            return typer.main.get_group_from_info(
                TyperInfo(found, name=self.name),
                pretty_exceptions_short=True,
                suggest_commands=True,
                rich_markup_mode=None,
            )
        return typer.main.get_command_from_info(
            CommandInfo(name=self.name, callback=found, cls=SpotrunCommand),
            pretty_exceptions_short=True,
            rich_markup_mode=None,
        )


class _LazyCommands(MutableMapping[str, Command]):
    """A group's commands by name: every name known, each command made at its first read."""

    def __init__(self, made: MutableMapping[str, Command], lazy: tuple[LazyCommand, ...]):
        self._made = dict(made)
        self._lazy = {command.name: command for command in lazy}

    def __getitem__(self, name: str) -> Command:
        if name not in self._made:
            self._made[name] = self._lazy[name].load()
        return self._made[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._made[name] = command

    def __delitem__(self, name: str) -> None:
        self._made.pop(name, None)
        self._lazy.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self._made
        yield from (name for name in self._lazy if name not in self._made)

    def __len__(self) -> int:
        return len(self._made.keys() | self._lazy.keys())

    def summary(self, name: str) -> Command:
        """The command if made, else a stand-in carrying only its summary (for help)."""
        if name in self._made:
            return self._made[name]
        return SpotrunCommand(name=name, help=self._lazy[name].summary)


class LazyGroup(SpotrunGroup):
    """A group of LazyCommands: `spotrun status` imports the status command's module, not
    launch's, sweep's or the controller's; help lists them all without importing them."""

    lazy_commands: tuple[LazyCommand, ...] = ()  # a subclass names them, in help's order

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.commands = _LazyCommands(self.commands, self.lazy_commands)

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)  # names only: typer's own reads every command

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        commands = self.commands
        assert isinstance(commands, _LazyCommands)
        shown = [(name, commands.summary(name)) for name in commands]
        shown = [(name, command) for name, command in shown if not command.hidden]
        if not shown:
            return
        # click's layout: the summaries get what the longest name and 6 spaces leave
        limit = formatter.width - 6 - max(len(name) for name, _ in shown)
        with formatter.section("Commands"):
            formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in shown])
