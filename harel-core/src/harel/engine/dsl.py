"""The statechart DSL (engine.md §4): compile text into :class:`Definition` trees.

``definition_from_dsl(text, name)`` compiles one machine; ``definitions_from_dsl(text)``
every machine of a text; ``definitions_from_dir(path)`` every machine of every ``*.stm`` file
in a directory.  Every problem raises :class:`DslError` with a 1-based line and column.

``actions`` maps the bare handler names used in ``on enter``/``on exit`` to callables (or to
dotted ``module.attr`` strings); every bare name must be bound.  Dotted names written in the
text need no binding: the runner imports them when it calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harel.engine._dsl_builder import build
from harel.engine._dsl_lexer import DslError, Source
from harel.engine._dsl_parser import MachineDecl, Program, parse
from harel.engine.definition import Definition

__all__ = [
    "DslError",
    "definition_from_dsl",
    "definition_from_dsl_file",
    "definitions_from_dir",
    "definitions_from_dsl",
    "machine_names",
]

Actions = Mapping[str, Callable[..., Any] | str]


def definition_from_dsl(
    text: str,
    name: str | None = None,
    *,
    actions: Actions | None = None,
    source_name: str = "<dsl>",
) -> Definition:
    """Compile the machine called ``name`` (optional when the text holds exactly one)."""
    source = Source(text, source_name)
    program = parse(source)
    return build(source, program, _pick(source, program, name), actions or {})


def machine_names(text: str, *, source_name: str = "<dsl>") -> list[str]:
    """The machine names ``text`` declares, in order (parsed, not compiled)."""
    return [decl.name for decl in parse(Source(text, source_name)).machines]


def definition_from_dsl_file(
    path: str | Path, name: str | None = None, *, actions: Actions | None = None
) -> Definition:
    """Like :func:`definition_from_dsl` on a file's text; errors name the file."""
    path = Path(path)
    return definition_from_dsl(
        path.read_text(encoding="utf-8"), name, actions=actions, source_name=str(path)
    )


def definitions_from_dsl(
    text: str, *, actions: Actions | None = None, source_name: str = "<dsl>"
) -> dict[str, Definition]:
    """Compile every machine of ``text``, keyed by machine name (= definition id)."""
    return {defn.id: defn for _, defn in _compile_all(Source(text, source_name), actions)}


def definitions_from_dir(
    path: str | Path, *, actions: Actions | None = None
) -> dict[str, Definition]:
    """Compile every machine of every ``*.stm`` file directly in ``path`` (files in name order).

    A machine name defined in two files raises :class:`DslError` naming both files.
    """
    directory = Path(path)
    if not directory.is_dir():
        raise NotADirectoryError(f"definitions directory {str(directory)!r} is not a directory")
    found: dict[str, Definition] = {}
    origin: dict[str, Path] = {}
    for file in sorted(directory.glob("*.stm")):
        source = Source(file.read_text(encoding="utf-8"), str(file))
        for decl, defn in _compile_all(source, actions):
            if defn.id in found:
                raise source.error_at(
                    decl.name_token,
                    f"machine '{defn.id}' is defined in both {origin[defn.id]} and {file}",
                )
            found[defn.id] = defn
            origin[defn.id] = file
    return found


def _compile_all(source: Source, actions: Actions | None) -> list[tuple[MachineDecl, Definition]]:
    program = parse(source)
    return [(decl, build(source, program, decl, actions or {})) for decl in program.machines]


def _pick(source: Source, program: Program, name: str | None) -> MachineDecl:
    names = [decl.name for decl in program.machines]
    if not names:
        raise source.error("the text declares no machine ('machine NAME { ... }')", 1, 1)
    if name is None:
        if len(names) > 1:
            raise source.error(
                f"the text declares several machines ({', '.join(names)}); pass name=", 1, 1
            )
        return program.machines[0]
    for decl in program.machines:
        if decl.name == name:
            return decl
    raise source.error(f"machine '{name}' not found; the text declares: {', '.join(names)}", 1, 1)
