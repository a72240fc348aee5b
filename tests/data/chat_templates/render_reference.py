#!/usr/bin/env python3
"""Renders every chat template of this folder for every case of
conversations.json with Jinja2, configured as Hugging Face transformers
renders chat templates (a sandboxed environment with trim_blocks and
lstrip_blocks, the loop-control extension, transformers' tojson, and the
raise_exception and strftime_now globals). dwell's Jinja engine must give
the same text: tests/core/text/jinja_reference_test.cpp compares.

Writes <template>.<case>.txt with the rendering, or <template>.<case>.error
with the exception's message when the template refuses the conversation.

Usage: render_reference.py [OUT_DIR]   (default: this folder)
"""
import json
import pathlib
import sys
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = pathlib.Path(__file__).resolve().parent


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
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
        template = env.from_string(path.read_text(encoding="utf-8"))
        for case, context in spec["cases"].items():
            variables = dict(spec["common"], **context)
            stem = out / f"{path.stem}.{case}"
            for old in (stem.with_suffix(stem.suffix + ".txt"), stem.with_suffix(stem.suffix + ".error")):
                old.unlink(missing_ok=True)
            try:
                text = template.render(**variables)
                (out / f"{path.stem}.{case}.txt").write_bytes(text.encode("utf-8"))
            except jinja2.exceptions.TemplateError as e:
                (out / f"{path.stem}.{case}.error").write_bytes(str(e).encode("utf-8"))


if __name__ == "__main__":
    main()
