//! The object store module against a real S3-compatible server (s3s-fs on
//! 127.0.0.1): the probe, a streamed multipart round trip checked by
//! hash, and the refusals a user meets with wrong credentials or a dead
//! endpoint, none of which shows a secret.

mod s3_support;

use std::path::Path;

use s3_support::{S3Server, SECRET_KEY};
use weir::objects::Objects;

fn open(server: &S3Server, prefix: &str, creds: &Path, secret: &str) -> Objects {
    let mut lines: Vec<String> = server
        .env()
        .into_iter()
        .filter(|(k, _)| k != "AWS_SECRET_ACCESS_KEY")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    lines.push(format!("AWS_SECRET_ACCESS_KEY={secret}"));
    std::fs::write(creds, lines.join("\n")).unwrap();
    Objects::open(&server.url(prefix), Some(creds)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_s3_store_round_trips_large_files_and_refuses_bad_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(&dir.path().join("s3"));
    let objects = open(&server, "weir", &dir.path().join("creds"), SECRET_KEY);
    assert_eq!(objects.shown(), "s3://weir-test/weir");
    objects.probe("test").await.unwrap();
    // Three parts of a multipart upload, the last one short.
    let data: Vec<u8> = (0..(weir::objects::BLOCK_BYTES * 2 + 4096))
        .map(|i| (i * 7 % 253) as u8)
        .collect();
    let src = dir.path().join("src");
    std::fs::write(&src, &data).unwrap();
    let hash = blake3::hash(&data).to_hex().to_string();
    objects.put_file("artifacts/x", &src).await.unwrap();
    assert_eq!(server.objects("weir/artifacts"), ["weir/artifacts/x"]);
    let dest = dir.path().join("dest");
    objects
        .get_file("artifacts/x", &dest, data.len() as u64, &hash)
        .await
        .unwrap();
    assert!(std::fs::read(&dest).unwrap() == data);
    let head = objects.head("artifacts/x").await.unwrap().unwrap();
    assert_eq!(head.bytes, data.len() as u64);
    assert!(objects.head("artifacts/none").await.unwrap().is_none());
    let listed = objects.list("artifacts").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].key, "artifacts/x");

    let wrong = open(
        &server,
        "weir",
        &dir.path().join("creds2"),
        "not-the-secret",
    );
    let e = wrong.probe("test").await.unwrap_err();
    assert!(e.contains("s3://weir-test/weir"), "{e}");
    assert!(
        !e.contains("not-the-secret") && !e.contains(SECRET_KEY),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_is_refused_promptly_naming_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = S3Server::start(&dir.path().join("s3"));
    let objects = open(&server, "p", &dir.path().join("creds"), SECRET_KEY);
    server.stop();
    let started = std::time::Instant::now();
    let e = objects.probe("test").await.unwrap_err();
    assert!(e.contains("s3://weir-test/p"), "{e}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the probe took {:?}",
        started.elapsed()
    );
    server.resume();
    objects.probe("test").await.unwrap();
}
