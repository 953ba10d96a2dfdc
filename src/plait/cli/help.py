"""How the commands' help reads: click's plain layout, with the names a person types.

Typer's own layout marks a required argument `{target}` in the usage line and follows each
name with its Python type (`target <str>`, `--store <str>`, `<list[str]>`). Here the usage
line reads `plait run [OPTIONS] TARGET [QUERY]`, an argument is listed by its name in
capitals (`TARGET...` when it takes several), and an option by its metavar (`--store URL`),
which every option that takes a value is given.

Typer converts each parameter's value through pydantic, the help flag's too when it was not
given (its value is then None, not False): a group's help flag is given False as its default,
so `plait run --help` and `plait version` do not load pydantic for it.
"""

from __future__ import annotations

from typing import Any

import typer.core

__all__ = ["PlaitCommand", "PlaitGroup"]


def _is_argument(param: Any) -> bool:
    return bool(param.param_type_name == "argument")


def _name(param: Any) -> str:
    """Return an argument's name as the help shows it: `TARGET`, `TARGET...`."""
    name = param.metavar or (param.name or "").upper()
    return f"{name}..." if param.nargs != 1 else name


def _help_flag_is_false(option: Any) -> Any:
    """Give the help flag False as its default (see the module's docstring)."""
    if option is not None and option.default is None:
        option.default = False
    return option


class PlaitCommand(typer.core.TyperCommand):
    """A command whose usage line and lists of arguments and options read plainly."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """Return `[OPTIONS]`, then each argument: `TARGET`, `[QUERY]`, `TARGET...`."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if _is_argument(param):
                pieces.append(_name(param) if param.required else f"[{_name(param)}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """Write the Arguments section (name, help), then the Options section."""
        params = [param for param in self.get_params(ctx) if not getattr(param, "hidden", False)]
        arguments = [(_name(p), getattr(p, "help", None) or "") for p in params if _is_argument(p)]
        options = [p.get_help_record(ctx) for p in params if not _is_argument(p)]
        for title, rows in (("Arguments", arguments), ("Options", options)):
            shown = [row for row in rows if row is not None]
            if shown:
                with formatter.section(title):
                    formatter.write_dl(shown)

    def get_help_option(self, ctx: Any) -> Any:
        """The help flag, with False as its default."""
        return _help_flag_is_false(super().get_help_option(ctx))


class PlaitGroup(typer.core.TyperGroup):
    """The `plait` group: its help flag has False as its default, as its commands' do."""

    def get_help_option(self, ctx: Any) -> Any:
        """The help flag, with False as its default."""
        return _help_flag_is_false(super().get_help_option(ctx))
