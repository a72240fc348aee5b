#!/usr/bin/env python3
"""Renders every chat template of this folder for every case of
conversations.json with Jinja2, configured as Hugging Face transformers
renders chat templates (a sandboxed environment with trim_blocks and
lstrip_blocks, the loop-control extension, transformers' tojson, and the
raise_exception and strftime_now globals). dwell's Jinja engine must give
the same text: tests/core/text/jinja_reference_test.cpp compares.

Writes <template>.<case>.txt with the rendering, or <template>.<case>.error
with the message of the template's raise_exception() (empty for any other
failure) when the template refuses the conversation.

Usage: render_reference.py [OUT_DIR]   (default: this folder)
"""
import json
import pathlib
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


class Raised(jinja2.exceptions.TemplateError):
    """What the template's raise_exception() raised."""


def raise_exception(message):
    raise Raised(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


class Generation(Extension):
    """transformers' {% generation %} ... {% endgeneration %}: marks the
    assistant's text for training masks; renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols, Generation])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    out = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    out.mkdir(parents=True, exist_ok=True)
    spec = json.loads((HERE / "conversations.json").read_text(encoding="utf-8"))
    env = environment()
    for path in sorted(HERE.glob("*.jinja")):
        try:
            template = env.from_string(path.read_text(encoding="utf-8"))
        except jinja2.exceptions.TemplateSyntaxError as e:
            print(f"{path.name}: Jinja2 cannot parse it: {e}", file=sys.stderr)
            continue
        for case, context in spec["cases"].items():
            variables = dict(spec["common"], **context)
            stem = out / f"{path.stem}.{case}"
            for old in (stem.with_suffix(stem.suffix + ".txt"), stem.with_suffix(stem.suffix + ".error")):
                old.unlink(missing_ok=True)
            try:
                text = template.render(**variables)
                (out / f"{path.stem}.{case}.txt").write_bytes(text.encode("utf-8"))
            except Raised as e:
                (out / f"{path.stem}.{case}.error").write_bytes(str(e).encode("utf-8"))
            except Exception:  # any other failure: dwell must fail too, in its own words
                (out / f"{path.stem}.{case}.error").write_bytes(b"")


if __name__ == "__main__":
    main()
