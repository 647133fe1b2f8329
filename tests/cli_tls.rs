//! What the CLI says when it cannot trust an engine's certificate (issue
//! #43 item 1): each cause — an unknown issuer (no `--ca`, or the wrong
//! file given), a name the certificate lacks, an expired certificate, a
//! CA served as the engine's own, an engine that does not speak TLS — has
//! its own message naming the fix, exits 2 (bad input: the README's table
//! lists 2 for `status` and `start`), and none says the engine does not
//! answer. Each case is a real `weir serve --tls-cert/--tls-key` on
//! 127.0.0.1; the certificates are made with rcgen, and with the openssl
//! recipe of docs/operations.md, which is run as written.

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serve_support::{ca_and_leaf, chain_def, free_port, start, weir, write_def, Served};

/// A `weir serve` of graph `g` over TLS with `cert` and `key` (PEM), in
/// `dir`; the files' paths are `dir/tls/{cert,key}.pem`.
fn serve_tls(dir: &Path, cert: &str, key: &str) -> Served {
    let tls = dir.join("tls");
    std::fs::create_dir_all(&tls).unwrap();
    let (c, k) = (tls.join("cert.pem"), tls.join("key.pem"));
    std::fs::write(&c, cert).unwrap();
    std::fs::write(&k, key).unwrap();
    serve_files(dir, &c, &k)
}

fn serve_files(dir: &Path, cert: &Path, key: &Path) -> Served {
    let defs = dir.join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let s = start(
        &[
            "serve",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        &defs,
        &dir.join("data"),
    );
    assert!(s.url.starts_with("https://127.0.0.1:"), "{}", s.url);
    s
}

/// Writes `pem` to `dir/name`: its path.
fn file(dir: &Path, name: &str, pem: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, pem).unwrap();
    p
}

/// `weir ARGS --data DATA`, trusting `ca` with `--ca` when given (and no
/// `$WEIR_CA`).
fn cli(s: &Served, args: &[&str], ca: Option<&Path>) -> Output {
    let mut c = weir();
    c.args(args).arg("--data").arg(&s.data);
    if let Some(ca) = ca {
        c.arg("--ca").arg(ca);
    }
    c.output().unwrap()
}

fn explain(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `o` exited 2 with every one of `words` on stderr, and without the
/// message of an engine that does not answer.
fn refused(o: &Output, words: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", explain(o));
    assert!(!err.contains("does not answer"), "{err}");
    for w in words {
        assert!(err.contains(w), "lacks {w:?}: {err}");
    }
}

fn ok(o: &Output) {
    assert_eq!(o.status.code(), Some(0), "{}", explain(o));
}

#[test]
fn a_private_ca_not_passed_and_the_wrong_file_passed_each_say_what_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = ca_and_leaf(&["127.0.0.1"]);
    let s = serve_tls(dir.path(), &cert, &key);
    let ca = file(dir.path(), "ca.pem", &ca);
    let leaf = dir.path().join("tls/cert.pem");
    // No --ca: the issuer is unknown; pass the CA.
    for args in [&["status"][..], &["start", "g", "2026-11-03"]] {
        refused(
            &cli(&s, args, None),
            &["unknown issuer", "--ca FILE", "$WEIR_CA", &s.url],
        );
    }
    // The engine's own certificate given as the CA (rcgen names issuer and
    // subject alike, so the signature is what fails): named, with the fix.
    refused(
        &cli(&s, &["status"], Some(&leaf)),
        &[
            &format!("does not verify against the CA in --ca {}", leaf.display()),
            "the engine's own certificate given as the CA",
        ],
    );
    let o = weir()
        .args(["status", "--data"])
        .arg(&s.data)
        .env("WEIR_CA", &leaf)
        .output()
        .unwrap();
    refused(
        &o,
        &[&format!("against the CA in $WEIR_CA={}", leaf.display())],
    );
    // The fix as said: the CA.
    ok(&cli(&s, &["status"], Some(&ca)));
    ok(&cli(&s, &["start", "g", "2026-11-03"], Some(&ca)));
}

#[test]
fn a_self_signed_certificate_is_an_unknown_issuer_and_needs_a_ca() {
    use rcgen::{CertificateParams, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let s = serve_tls(dir.path(), &cert.pem(), &key.serialize_pem());
    refused(
        &cli(&s, &["status"], None),
        &[
            "unknown issuer",
            "--ca FILE",
            "a self-signed engine certificate will not do",
            "docs/operations.md#tls-certificates-with-openssl",
        ],
    );
}

#[test]
fn a_certificate_without_the_ip_san_names_what_it_has_and_what_is_needed() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = ca_and_leaf(&["localhost"]);
    let s = serve_tls(dir.path(), &cert, &key);
    let ca = file(dir.path(), "ca.pem", &ca);
    refused(
        &cli(&s, &["status"], Some(&ca)),
        &[
            "is for DNS:localhost only, not 127.0.0.1",
            "subjectAltName has IP:127.0.0.1",
            "--engine https://NAME:PORT",
        ],
    );
    // The other fix said: reach it by a name it has.
    let by_name = s.url.replace("127.0.0.1", "localhost");
    ok(&cli(&s, &["status", "--engine", &by_name], Some(&ca)));
}

#[test]
fn an_expired_certificate_says_when_it_expired() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    leaf.not_before = rcgen::date_time_ymd(2020, 1, 1);
    leaf.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let leaf = leaf.signed_by(&key, &ca, &ca_key).unwrap();
    let s = serve_tls(dir.path(), &leaf.pem(), &key.serialize_pem());
    let ca = file(dir.path(), "ca.pem", &ca.pem());
    refused(
        &cli(&s, &["status"], Some(&ca)),
        &["expired at 2021-01-01 00:00:00 UTC", "renewed certificate"],
    );
}

#[test]
fn a_ca_served_as_the_engines_certificate_says_to_serve_one_it_signs() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = params.self_signed(&key).unwrap();
    let s = serve_tls(dir.path(), &ca.pem(), &key.serialize_pem());
    let ca = file(dir.path(), "ca.pem", &ca.pem());
    refused(
        &cli(&s, &["status"], Some(&ca)),
        &[
            "is a CA certificate",
            "CA:TRUE",
            "serve a certificate that CA signs",
        ],
    );
}

#[test]
fn https_to_a_plain_engine_and_to_nothing_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    let https = s.url.replace("http://", "https://");
    refused(
        &cli(&s, &["status", "--engine", &https], None),
        &["does not speak TLS", "http://"],
    );
    // Nothing listens: still "does not answer", an I/O error.
    let nothing = format!("https://127.0.0.1:{}", free_port());
    let o = cli(&s, &["status", "--engine", &nothing], None);
    assert_eq!(o.status.code(), Some(3), "{}", explain(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("does not answer"),
        "{}",
        explain(&o)
    );
}

/// The shell lines of docs/operations.md's openssl recipe (the `weir`
/// lines left out: the test runs weir itself).
fn recipe() -> String {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md"))
            .unwrap();
    let at = doc
        .find("### TLS certificates with openssl")
        .expect("docs/operations.md has the openssl recipe");
    let start = doc[at..].find("```sh\n").unwrap() + at + "```sh\n".len();
    let end = doc[start..].find("```").unwrap() + start;
    doc[start..end]
        .lines()
        .filter(|l| !l.starts_with("weir "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_openssl_recipe_of_the_docs_makes_a_certificate_the_cli_trusts() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let o = std::process::Command::new("sh")
        .args(["-ec", &recipe()])
        .current_dir(&certs)
        .output()
        .expect("sh and openssl (the recipe's tool) are installed");
    assert_eq!(o.status.code(), Some(0), "the recipe: {}", explain(&o));
    let s = serve_files(dir.path(), &certs.join("cert.pem"), &certs.join("key.pem"));
    let ca = certs.join("ca.pem");
    ok(&cli(&s, &["status"], Some(&ca)));
    let by_name = s.url.replace("127.0.0.1", "localhost");
    ok(&cli(&s, &["status", "--engine", &by_name], Some(&ca)));
    // Without --ca, the fix is named; the engine's own certificate given
    // as the CA (its issuer named apart from it, as openssl makes them)
    // is not its issuer.
    refused(
        &cli(&s, &["status"], None),
        &["unknown issuer", "--ca FILE"],
    );
    let leaf = certs.join("cert.pem");
    refused(
        &cli(&s, &["status"], Some(&leaf)),
        &[
            &format!("not signed by the CA in --ca {}", leaf.display()),
            "not the engine's own certificate",
        ],
    );
    drop(s);
    // `openssl req -x509` alone (the recipe's first step) makes a CA: one
    // served as the engine's certificate is named as such.
    let s = serve_files(&dir.path().join("ca-as-leaf"), &ca, &certs.join("ca.key"));
    refused(
        &cli(&s, &["status"], Some(&ca)),
        &["is a CA certificate", "CA:TRUE"],
    );
}
