"""The generated module stays true to the document: regenerated from the
document a live engine serves (and from the committed one, which must be
the same), it is byte for byte the committed weir/_generated.py."""

import importlib.util
import json
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
PKG = HERE.parent
REPO = PKG.parents[1]


def load_generator():
    spec = importlib.util.spec_from_file_location("weir_generate", PKG / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_models_are_those_the_served_document_gives(chain):
    gen = load_generator()
    served = httpx.get(chain.url + "/api/v1/openapi.json",
                       headers={"Authorization": f"Bearer {chain.token}"}, timeout=30)
    assert served.status_code == 200
    served_doc = served.json()
    committed_doc = json.loads((REPO / "src" / "serve" / "openapi.json").read_text())
    assert served_doc == committed_doc, "the engine serves another document than src/serve/openapi.json"
    committed = (PKG / "weir" / "_generated.py").read_text()
    assert gen.generate(served_doc) == committed, (
        "weir/_generated.py is stale: run `python3 clients/python/generate.py`")
    assert gen.main(["--check"]) == 0


def test_every_operation_and_schema_is_generated():
    import weir._generated as g
    doc = json.loads((REPO / "src" / "serve" / "openapi.json").read_text())
    ids = {o["operationId"] for p in doc["paths"].values() for m, o in p.items()
           if m in ("get", "post", "put", "patch", "delete")}
    assert {op.id for op in g.OPERATIONS.values()} == ids
    for op in g.OPERATIONS.values():
        assert callable(getattr(g.Api, op.id.replace("_api_v1_", "_")))
        assert callable(getattr(g.AsyncApi, op.id.replace("_api_v1_", "_")))
    for name in doc["components"]["schemas"]:
        assert hasattr(g, name), name
    # A body decodes into its dataclass, and back.
    page = g.RunPage.from_json({"runs": [{"graph": "g", "partition": "none", "definition": "d",
                                          "requested_at_ms": 1, "state": "complete",
                                          "timezone": "UTC", "new_field": 1}],
                                "next_cursor": None})
    assert page.runs[0].state == "complete" and page.runs[0].extra == {"new_field": 1}
    assert page.to_json()["runs"][0]["partition"] == "none"
