#!/usr/bin/env python3
"""Generates weir/_generated.py from weir's OpenAPI document.

    python3 generate.py [OPENAPI_JSON] [--check]

OPENAPI_JSON defaults to the repository's src/serve/openapi.json (a live
engine serves the same document at /api/v1/openapi.json). --check writes
nothing and exits 1 when the committed module differs from what the
document gives.

Why a generator of our own, and not openapi-python-client or
openapi-generator: those need a toolchain (Java, or a pinned tree of
packages and templates) to regenerate, and emit thousands of lines per
API; weir's document uses a small, regular subset of JSON Schema (objects,
arrays, maps, nullable scalars, string enums as `oneOf` of `const`, `$ref`),
so a stdlib-only script of a few hundred lines gives stable, reviewable
output: a dataclass per schema, a Literal per enum, and one method per
operation, sync and async. Standard library only, deterministic (sorted,
no timestamps), so a regenerated module is byte-identical.
"""

import json
import keyword
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DOC = os.path.join(HERE, "..", "..", "src", "serve", "openapi.json")
OUT = os.path.join(HERE, "weir", "_generated.py")

SCALARS = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


def ident(name):
    """A JSON name as a Python identifier (`from` -> `from_`)."""
    n = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if keyword.iskeyword(n) or n in ("self",):
        n += "_"
    if n[0].isdigit():
        n = "_" + n
    return n


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


class Gen:
    def __init__(self, doc):
        self.doc = doc
        self.schemas = doc.get("components", {}).get("schemas", {})

    # -- types: (annotation, decode spec) ------------------------------------
    # A decode spec is a small JSON-like value the runtime walks:
    # "any", ["ref", Name], ["list", spec], ["map", spec], ["opt", spec].
    def typ(self, s):
        if not isinstance(s, dict) or not s:
            return "Any", "any"
        if "$ref" in s:
            name = s["$ref"].rsplit("/", 1)[-1]
            kind = self.kind(name)
            if kind == "model":
                return f"'{name}'", ["ref", name]
            return f"'{name}'", "any"
        if "anyOf" in s or "oneOf" in s:
            alts = s.get("anyOf") or s.get("oneOf")
            non_null = [a for a in alts if a.get("type") != "null"]
            if len(non_null) == 1 and len(non_null) < len(alts):
                a, spec = self.typ(non_null[0])
                return f"Optional[{a}]", ["opt", spec]
            consts = [a.get("const") for a in alts]
            if all(isinstance(c, str) for c in consts):
                return "Literal[" + ", ".join(json.dumps(c) for c in consts) + "]", "any"
            return "Any", "any"
        if "const" in s:
            return f"Literal[{json.dumps(s['const'])}]", "any"
        if "enum" in s:
            return "Literal[" + ", ".join(json.dumps(c) for c in s["enum"]) + "]", "any"
        t = s.get("type")
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            if len(rest) == 1:
                a, spec = self.typ(dict(s, type=rest[0]))
                return (f"Optional[{a}]", ["opt", spec]) if "null" in t else (a, spec)
            return "Any", "any"
        if t in SCALARS:
            return SCALARS[t], "any"
        if t == "array":
            if "items" in s:
                a, spec = self.typ(s["items"])
                return f"List[{a}]", ["list", spec] if spec != "any" else "any"
            return "List[Any]", "any"
        if t == "object":
            ap = s.get("additionalProperties")
            if isinstance(ap, dict) and not s.get("properties"):
                a, spec = self.typ(ap)
                return f"Dict[str, {a}]", ["map", spec] if spec != "any" else "any"
            return "Dict[str, Any]", "any"
        if t == "null":
            return "None", "any"
        return "Any", "any"

    def kind(self, name):
        s = self.schemas[name]
        if s.get("type") == "object" or "properties" in s:
            return "model"
        return "alias"

    # -- models ----------------------------------------------------------------
    def model(self, name, s, out):
        props = s.get("properties", {})
        required = set(s.get("required", []))
        doc = (s.get("description") or name).strip().replace('"""', "'''")
        out.append("@dataclass")
        out.append(f"class {name}(Model):")
        out.append(f'    """{doc}"""')
        out.append("")
        fields, specs = [], []
        ordered = sorted(props, key=lambda p: (p not in required, p))
        for p in ordered:
            ps = props[p]
            ann, spec = self.typ(ps)
            py = ident(p)
            if p in required:
                line = f"    {py}: {ann}"
            else:
                d = ps.get("default", None)
                if isinstance(d, dict):
                    line = f"    {py}: {ann} = field(default_factory=dict)"
                elif isinstance(d, list):
                    line = f"    {py}: {ann} = field(default_factory=list)"
                elif d is None:
                    if not ann.startswith("Optional["):
                        ann = f"Optional[{ann}]"
                    line = f"    {py}: {ann} = None"
                else:
                    line = f"    {py}: {ann} = {d!r}"
            desc = (ps.get("description") or "").strip().splitlines()
            if desc:
                out.append(f"    #: {desc[0]}")
            fields.append(line)
            out.append(line)
            specs.append(f"        {json.dumps(p)}: ({json.dumps(py)}, {json.dumps(spec)}),")
        if not props:
            out.append("    pass")
        out.append("")
        out.append("    _FIELDS: ClassVar[Dict[str, Tuple[str, Any]]] = {")
        out.extend(specs)
        out.append("    }")
        out.append("")
        out.append("")

    def alias(self, name, s, out):
        ann, _ = self.typ(s)
        desc = (s.get("description") or "").strip().splitlines()
        if desc:
            out.append(f"#: {desc[0]}")
        out.append(f"{name} = {ann}")
        alts = s.get("oneOf") or []
        consts = [a.get("const") for a in alts]
        if alts and all(isinstance(c, str) for c in consts):
            out.append(f"{snake(name)}_VALUES = ({', '.join(json.dumps(c) for c in consts)},)")
        out.append("")

    # -- operations ------------------------------------------------------------
    def operations(self):
        ops = []
        for path in sorted(self.doc["paths"]):
            item = self.doc["paths"][path]
            for method in ("get", "post", "put", "patch", "delete"):
                if method not in item:
                    continue
                o = item[method]
                ops.append(self.operation(path, method, o))
        return ops

    def operation(self, path, method, o):
        oid = o["operationId"]
        name = ident(oid.replace("_api_v1_", "_"))
        params = o.get("parameters", [])
        path_params = [(p["name"], ident(p["name"])) for p in params if p["in"] == "path"]
        query = [(p["name"], ident(p["name"]), self.typ(p.get("schema", {}))[0], p.get("required", False))
                 for p in params if p["in"] == "query"]
        body = None
        rb = o.get("requestBody")
        if rb:
            bs = rb.get("content", {}).get("application/json", {}).get("schema", {})
            if "$ref" in bs:
                bs = self.schemas[bs["$ref"].rsplit("/", 1)[-1]]
            body = {
                "required": rb.get("required", False),
                "props": [
                    (p, ident(p), self.typ(ps)[0], p in set(bs.get("required", [])))
                    for p, ps in sorted(bs.get("properties", {}).items())
                ],
            }
        responses = {}
        for status, r in sorted(o.get("responses", {}).items()):
            content = r.get("content", {})
            if "application/json" in content:
                sch = content["application/json"].get("schema", {})
                ann, spec = self.typ(sch)
                responses[status] = ("json", ann, spec)
            elif content:
                responses[status] = ("raw", "bytes", "any")
            else:
                responses[status] = ("none", "None", "any")
        ok = [s for s in responses if s.startswith("2")]
        ret = responses[ok[0]][1] if ok else "Any"
        return {
            "id": oid,
            "name": name,
            "method": method.upper(),
            "path": path,
            "role": o.get("x-weir-role"),
            "summary": (o.get("summary") or o.get("description") or "").strip().splitlines()[:1],
            "path_params": path_params,
            "query": query,
            "body": body,
            "responses": responses,
            "ret": ret,
        }

    def op_table(self, ops, out):
        out.append("OPERATIONS: Dict[str, Operation] = {")
        for op in ops:
            resp = ", ".join(
                f"{json.dumps(s)}: ({json.dumps(k)}, {json.dumps(spec)})"
                for s, (k, _a, spec) in op["responses"].items()
            )
            out.append(f"    {json.dumps(op['name'])}: Operation(")
            out.append(f"        {json.dumps(op['id'])}, {json.dumps(op['method'])}, {json.dumps(op['path'])},")
            out.append(f"        {op['role']!r}, {{{resp}}},")
            out.append("    ),")
        out.append("}")
        out.append("")

    def methods(self, ops, out, is_async):
        cls = "AsyncApi" if is_async else "Api"
        out.append(f"class {cls}:")
        kind = "async " if is_async else ""
        out.append(f'    """Every operation of the document, one {kind}method each (generated).')
        out.append("")
        out.append("    Each returns the decoded body of its success answer and raises")
        out.append("    a :class:`weir.errors.ApiError` subclass for any other.")
        out.append('    """')
        out.append("")
        out.append("    def __init__(self, call: Callable[..., Any]) -> None:")
        out.append("        self._call = call")
        out.append("")
        for op in ops:
            args = ["self"] + [f"{py}: str" for _, py in op["path_params"]]
            kw = []
            body_fields = []
            taken = {py for _, py in op["path_params"]}
            if op["body"]:
                for p, py, ann, req in op["body"]["props"]:
                    if py in taken:
                        py = "body_" + py
                    taken.add(py)
                    body_fields.append((p, py, req))
                    kw.append(f"{py}: {ann}" if req else f"{py}: Optional[{ann}] = None")
            query_fields = []
            for p, py, ann, req in op["query"]:
                if py in taken:
                    py = "query_" + py
                taken.add(py)
                query_fields.append((p, py))
                kw.append(f"{py}: {ann}" if req else f"{py}: Optional[{ann}] = None")
            kw.sort(key=lambda k: "=" in k)
            if kw:
                args.append("*")
                args.extend(kw)
            ret = op["ret"]
            out.append(f"    {kind}def {op['name']}({', '.join(args)}) -> {ret}:")
            summary = op["summary"][0] if op["summary"] else ""
            role = f" Role: {op['role']}." if op["role"] else ""
            out.append(f'        """{op["method"]} {op["path"]}: {summary}{role}"""'.replace("\\", "\\\\"))
            pp = ", ".join(f"{json.dumps(p)}: {py}" for p, py in op["path_params"])
            qq = ", ".join(f"{json.dumps(p)}: {py}" for p, py in query_fields)
            if op["body"] is None:
                bb = "None"
            else:
                bb = "{" + ", ".join(f"{json.dumps(p)}: {py}" for p, py, _ in body_fields) + "}"
            aw = "await " if is_async else ""
            out.append(f"        return {aw}self._call(OPERATIONS[{json.dumps(op['name'])}], {{{pp}}}, {{{qq}}}, {bb})  # type: ignore[no-any-return]")
            out.append("")
        out.append("")

    def render(self):
        out = [
            "# Generated by clients/python/generate.py from weir's OpenAPI document",
            f"# ({self.doc.get('info', {}).get('title', 'weir')} {self.doc.get('info', {}).get('version', '')}). Do not edit: regenerate.",
            "# flake8: noqa",
            '"""Models and operations of weir\'s HTTP API, generated from its OpenAPI document."""',
            "",
            "from dataclasses import dataclass, field",
            "from typing import Any, Callable, ClassVar, Dict, List, Literal, Optional, Tuple",
            "",
            "from ._model import Model, Operation",
            "",
            "",
        ]
        for name in sorted(self.schemas):
            if self.kind(name) == "alias":
                self.alias(name, self.schemas[name], out)
        out.append("")
        for name in sorted(self.schemas):
            if self.kind(name) == "model":
                self.model(name, self.schemas[name], out)
        out.append("MODELS: Dict[str, type] = {")
        for name in sorted(self.schemas):
            if self.kind(name) == "model":
                out.append(f"    {json.dumps(name)}: {name},")
        out.append("}")
        out.append("")
        ops = self.operations()
        self.op_table(ops, out)
        out.append("")
        self.methods(ops, out, False)
        self.methods(ops, out, True)
        text = "\n".join(out).rstrip() + "\n"
        return re.sub(r"\n{4,}", "\n\n\n", text)


def generate(doc):
    """The module's text for the document `doc` (a parsed JSON object)."""
    return Gen(doc).render()


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    src = args[0] if args else DEFAULT_DOC
    with open(src, encoding="utf-8") as f:
        text = generate(json.load(f))
    if check:
        try:
            with open(OUT, encoding="utf-8") as f:
                same = f.read() == text
        except FileNotFoundError:
            same = False
        if not same:
            print(f"{OUT} differs from what {src} gives: run generate.py", file=sys.stderr)
            return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
