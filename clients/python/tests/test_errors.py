"""Roles, bad input and TLS: each failure is the documented exception with
the server's message, never an exception of the HTTP library."""

import subprocess

import httpx
import pytest

import weir
from weir import _core
from conftest import free_port


def test_a_viewer_cannot_start_and_is_told_the_role(chain):
    viewer = chain.make_token("reader", "viewer")
    with weir.Client(url=chain.url, token=viewer) as c:
        assert c.api.get_graphs()[0].name == "g"  # reading is allowed
        with pytest.raises(weir.Forbidden) as e:
            c.start("g", "2020-01-01")
        assert e.value.status == 403 and e.value.role == "operator"
        assert "needs the operator role" in e.value.message
        assert "viewer" in str(e.value)
    with weir.Client(url=chain.url, token="x" * 40) as c:
        with pytest.raises(weir.Unauthorized) as e:
            c.runs().__next__()
        assert e.value.status == 401 and e.value.message


def test_bad_input_names_the_problem(chain):
    with weir.Client(url=chain.url, token=chain.token) as c:
        with pytest.raises(weir.NotFound, match='graph "nope"') as e:
            c.start("nope", "2020-01-01")
        assert e.value.status == 404
        with pytest.raises(weir.BadRequest) as e:
            c.start("g", "2020-13-45")
        assert "2020-13-45" in e.value.message
        with pytest.raises(weir.NotFound):
            c.status("g", "2021-01-01")
        with pytest.raises(weir.BadRequest):
            c.start("g", "2020-01-01", params={"undeclared": "x"})
        with pytest.raises(weir.PayloadTooLarge) as e:
            c.start("g", ["2020-01-01"] * 10_000)
        assert e.value.status == 413
        with pytest.raises(weir.ConfigError, match="only dots"):
            c.status("g", "..")
        # 415: a body that is not JSON (through the raw transport).
        r = c._http.post(chain.url + "/api/v1/graphs/g/runs", content=b"partitions=x",
                         headers={"content-type": "text/plain"})
        with pytest.raises(weir.UnsupportedMediaType) as e:
            _core.decode_answer(_core.OP["post_graphs_graph_runs"], r.status_code, r.content)
        assert e.value.status == 415 and e.value.message


def test_a_wrong_url_or_nothing_listening(tmp_path):
    with pytest.raises(weir.ConfigError, match="not an http"):
        weir.Client(url="ftp://127.0.0.1:1", token="t" * 20)
    with pytest.raises(weir.ConfigError, match="not an http"):
        weir.Client(url="not a url", token="t" * 20)
    with weir.Client(url=f"http://127.0.0.1:{free_port()}", token="t" * 20) as c:
        with pytest.raises(weir.ConnectionFailed, match="no engine answers") as e:
            c.status("g", "2020-01-01")
        assert not isinstance(e.value, httpx.HTTPError)
        assert e.value.__suppress_context__
    with pytest.raises(weir.ConfigError, match="token file"):
        weir.Client(url="http://127.0.0.1:1", token_file=tmp_path / "absent")
    with pytest.raises(weir.ConfigError, match="not a weir data directory"):
        weir.Client(data=tmp_path)


def tls_files(d):
    ext = d / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    run = lambda *a: subprocess.run(a, cwd=d, check=True, capture_output=True)  # noqa: E731
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("openssl", "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=weir test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("openssl", "req", *ec, "-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=127.0.0.1")
    run("openssl", "x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "cert.pem", "-days", "2", "-extfile", "ext.cnf")
    return d / "ca.pem", d / "cert.pem", d / "key.pem"


def test_tls_with_a_private_ca(engines, tmp_path, monkeypatch):
    from conftest import chain_def
    ca, cert, key = tls_files(tmp_path)
    e = engines({"g": chain_def("g")}, ["--tls-cert", str(cert), "--tls-key", str(key)])
    assert e.url.startswith("https://")
    with weir.Client(url=e.url, token=e.token) as c:
        with pytest.raises(weir.CertificateRefused, match="ca=") as err:
            c.api.get_graphs()
        assert isinstance(err.value, weir.ConnectionFailed)
    with weir.Client(url=e.url, token=e.token, ca=ca) as c:
        assert c.api.get_graphs()[0].name == "g"
        assert c.start("g", "2020-01-01")[0].started
        assert c.wait("g", "2020-01-01", timeout=30).state == "complete"
    monkeypatch.setenv("WEIR_CA", str(ca))
    with weir.Client(data=e.data) as c:
        assert c.api.get_graphs()[0].name == "g"
    with pytest.raises(weir.ConfigError, match="not a PEM"):
        weir.Client(url=e.url, token=e.token, ca=key.parent / "ext.cnf")
    plain = e.url.replace("https://", "http://")
    with weir.Client(url=plain, token=e.token) as c:
        with pytest.raises(weir.WeirError):
            c.api.get_graphs()
