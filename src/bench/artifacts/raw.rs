//! The raw transfers each artifact figure stands beside: the same bytes
//! through the same store, without weir.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use rand::RngCore;

use super::common::{failed, median, sync_disks, IN_FLIGHT, SMALL_BYTES, WIDTH};
use crate::bench::report::BenchError;
use crate::objects::Objects;

pub(super) fn random_bytes(n: usize) -> Bytes {
    let mut v = vec![0u8; n];
    rand::thread_rng().fill_bytes(&mut v);
    Bytes::from(v)
}

/// Reads the object `key` to its end; its size.
pub(super) async fn get_all(objects: &Objects, key: &str) -> Result<u64, BenchError> {
    let (_, mut s) = objects.get_stream(key).await.map_err(failed("raw get"))?;
    let mut n = 0u64;
    while let Some(block) = s.next().await {
        n += block.map_err(failed("raw get"))?.len() as u64;
    }
    Ok(n)
}

/// Deletes every object under `prefix`.
pub(super) async fn delete_all(objects: &Objects, prefix: &str) -> Result<(), BenchError> {
    for o in objects.list(prefix).await.map_err(failed("list"))? {
        objects.delete(&o.key).await.map_err(failed("delete"))?;
    }
    Ok(())
}

/// Writes the object `key` into the file `dest` as it comes (no check, no
/// hash: a plain copy); its size.
pub(super) async fn get_into(objects: &Objects, key: &str, dest: &Path) -> Result<u64, BenchError> {
    use tokio::io::AsyncWriteExt as _;
    let (_, mut s) = objects.get_stream(key).await.map_err(failed("raw get"))?;
    let mut out = tokio::io::BufWriter::with_capacity(
        crate::objects::READ_BLOCK_BYTES,
        tokio::fs::File::create(dest)
            .await
            .map_err(failed("raw get file"))?,
    );
    let mut n = 0u64;
    while let Some(block) = s.next().await {
        let block = block.map_err(failed("raw get"))?;
        n += block.len() as u64;
        out.write_all(&block)
            .await
            .map_err(failed("raw get file"))?;
    }
    out.flush().await.map_err(failed("raw get file"))?;
    Ok(n)
}

/// How the raw transfers take and leave the bytes.
#[derive(Clone, Copy)]
pub(super) enum Raw<'a> {
    /// From memory, and read to nowhere: the store's own speed.
    Memory,
    /// From a file (`put_file`) and into a file in this folder: what a
    /// plain copy of files through the store costs (`aws s3 cp` up and
    /// down), the raw equivalent of handing a file to a downstream.
    Files(&'a Path),
}

/// One raw get of the fan-out, as `raw` says; its size.
pub(super) async fn raw_get(
    objects: &Objects,
    key: &str,
    raw: Raw<'_>,
    n: usize,
) -> Result<u64, BenchError> {
    match raw {
        Raw::Memory => get_all(objects, key).await,
        Raw::Files(dir) => {
            let dest = dir.join(format!("got{n}"));
            let got = get_into(objects, key, &dest).await?;
            let _ = tokio::fs::remove_file(&dest).await;
            Ok(got)
        }
    }
}

/// One raw put of the fan-out, as `raw` says.
pub(super) async fn raw_put(
    objects: &Objects,
    key: &str,
    data: &Bytes,
    raw: Raw<'_>,
) -> Result<(), BenchError> {
    match raw {
        Raw::Memory => objects.put_bytes(key, data.clone()).await,
        Raw::Files(dir) => objects.put_file(key, &dir.join("src")).await.map(|_| ()),
    }
    .map_err(failed("raw put"))
}

/// The fan-out's transfers, raw: one put of `bytes`, WIDTH (get it, put a
/// part) IN_FLIGHT at a time, then WIDTH gets of the parts IN_FLIGHT at a
/// time, from and to memory or files as `raw` says (the source file is
/// written before the clock starts: the graph's baseline writes its
/// files too). Its time and the bytes it moved.
pub(super) async fn raw_fan(
    objects: &Objects,
    tag: &str,
    bytes: u64,
    raw: Raw<'_>,
) -> Result<(Duration, u64), BenchError> {
    let data = random_bytes(bytes as usize);
    if let Raw::Files(dir) = raw {
        std::fs::create_dir_all(dir).map_err(failed("raw folder"))?;
        std::fs::write(dir.join("src"), &data).map_err(failed("raw file"))?;
    }
    let make = format!("raw/{tag}/make");
    let parts: Vec<String> = (0..WIDTH).map(|i| format!("raw/{tag}/part{i}")).collect();
    let started = Instant::now();
    raw_put(objects, &make, &data, raw).await?;
    let got: Vec<u64> = futures::stream::iter(parts.iter().enumerate().map(|(i, k)| {
        let (data, make) = (&data, &make);
        async move {
            let n = raw_get(objects, make, raw, i).await?;
            raw_put(objects, k, data, raw).await?;
            Ok::<u64, BenchError>(n)
        }
    }))
    .buffer_unordered(IN_FLIGHT)
    .try_collect()
    .await?;
    let joined: Vec<u64> = futures::stream::iter(
        parts
            .iter()
            .enumerate()
            .map(|(i, k)| raw_get(objects, k, raw, WIDTH + i)),
    )
    .buffer_unordered(IN_FLIGHT)
    .try_collect()
    .await?;
    let took = started.elapsed();
    if let Raw::Files(dir) = raw {
        let _ = std::fs::remove_dir_all(dir);
    }
    let moved = bytes * (1 + WIDTH as u64) + got.iter().sum::<u64>() + joined.iter().sum::<u64>();
    if moved != bytes * (1 + 3 * WIDTH as u64) {
        return Err(BenchError::Failed(format!(
            "raw transfers moved {moved} bytes, not {}",
            bytes * (1 + 3 * WIDTH as u64)
        )));
    }
    delete_all(objects, "raw").await?;
    sync_disks();
    Ok((took, moved))
}

/// `n` raw get + put of SMALL_BYTES, in a node's order: the get of the
/// object the step before put, then the put of a new one. Their times.
pub(super) async fn raw_small(objects: &Objects, n: usize) -> Result<Vec<Duration>, BenchError> {
    let mut out = Vec::with_capacity(n);
    let key = |i: usize| format!("raw/small/{i}");
    objects
        .put_bytes(&key(0), random_bytes(SMALL_BYTES))
        .await
        .map_err(failed("raw put"))?;
    for i in 1..=n {
        let data = random_bytes(SMALL_BYTES);
        let t = Instant::now();
        get_all(objects, &key(i - 1)).await?;
        objects
            .put_bytes(&key(i), data)
            .await
            .map_err(failed("raw put"))?;
        out.push(t.elapsed());
    }
    delete_all(objects, "raw").await?;
    sync_disks();
    Ok(out)
}

/// Medians of `reps` single transfers of one `bytes`-byte file, one
/// after the other, each step of an artifact's way beside its raw peer:
/// (raw put, `put_file`, `hash_file`, raw get, `get_file`).
pub(super) async fn steps(
    objects: &Objects,
    dir: &Path,
    bytes: u64,
    reps: usize,
) -> Result<[Duration; 5], BenchError> {
    let mut t: [Vec<Duration>; 5] = Default::default();
    std::fs::create_dir_all(dir).map_err(failed("steps folder"))?;
    let file = dir.join("file");
    let dest = dir.join("got");
    for i in 0..reps {
        let data = random_bytes(bytes as usize);
        std::fs::write(&file, &data).map_err(failed("steps file"))?;
        sync_disks();
        let (raw_key, key) = (format!("raw/steps/{i}"), format!("raw/steps/f{i}"));
        let s = Instant::now();
        objects
            .put_bytes(&raw_key, data)
            .await
            .map_err(failed("raw put"))?;
        t[0].push(s.elapsed());
        let s = Instant::now();
        objects
            .put_file(&key, &file)
            .await
            .map_err(failed("put_file"))?;
        t[1].push(s.elapsed());
        let s = Instant::now();
        let (hash, _) = crate::artifacts::hash_file(&file).map_err(failed("hash"))?;
        t[2].push(s.elapsed());
        let s = Instant::now();
        get_all(objects, &raw_key).await?;
        t[3].push(s.elapsed());
        let s = Instant::now();
        objects
            .get_file(&key, &dest, bytes, &hash)
            .await
            .map_err(failed("get_file"))?;
        t[4].push(s.elapsed());
        let _ = std::fs::remove_file(&dest);
    }
    delete_all(objects, "raw").await?;
    let _ = std::fs::remove_dir_all(dir);
    sync_disks();
    Ok(t.map(median))
}
