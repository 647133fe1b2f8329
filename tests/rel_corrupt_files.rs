//! Every store file damaged every way (issue 13's corruption suite): bytes
//! flipped at its start, middle and end, cut to half, cut to nothing,
//! deleted. `weir status` on the result either exits 0 with every record
//! of the store intact (sled keeps copies of some headers and may repair
//! them, and some files are only hints), or exits 3 with a message that
//! names the damaged file — never a panic (101), never an exit 0 with
//! records gone.

use std::path::{Path, PathBuf};
use std::process::Command;

use weir::actors::store::{Commit, Durability, Store, StoreSettings};
use weir::core::queue::{Job, Op};

const RECORDS: usize = 60 * 40;

fn settings() -> StoreSettings {
    StoreSettings {
        durability: Durability::Flush,
        reserve_file_bytes: 0,
        ..StoreSettings::default()
    }
}

/// A store of several MiB with records and journaled tickets, closed.
fn build(dir: &Path) {
    let (store, _) = Store::open(dir, settings()).expect("a new store opens");
    for chunk in 0..60 {
        let puts: Vec<(String, Vec<u8>)> = (0..40)
            .map(|j| {
                let v = weir::core::codec::encode(&"v".repeat(1_200)).unwrap();
                (format!("r/{chunk}/{j}"), v)
            })
            .collect();
        store.put_batch(&puts, &[]).unwrap();
        let ops: Vec<Op> = (0..10)
            .map(|j| Op::Enqueue(Job::new(format!("k{chunk}-{j}"), "noop", "p")))
            .collect();
        store
            .commit(&Commit {
                ops,
                ..Commit::default()
            })
            .unwrap();
    }
    drop(store);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// The store's files, relative to the data directory.
fn store_files(data: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![data.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(data).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

type Damage = (&'static str, fn(&Path));

fn flip_at(p: &Path, at: fn(u64) -> u64) {
    let mut bytes = std::fs::read(p).unwrap();
    if bytes.is_empty() {
        return;
    }
    let start = (at(bytes.len() as u64) as usize).min(bytes.len() - 1);
    let end = (start + 64).min(bytes.len());
    for b in &mut bytes[start..end] {
        *b = !*b;
    }
    std::fs::write(p, bytes).unwrap();
}

const DAMAGES: &[Damage] = &[
    ("flipped at its start", |p| flip_at(p, |_| 0)),
    ("flipped in its middle", |p| flip_at(p, |n| n / 2)),
    ("flipped at its end", |p| {
        flip_at(p, |n| n.saturating_sub(64))
    }),
    ("cut to half", |p| {
        let n = std::fs::metadata(p).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(n / 2)
            .unwrap();
    }),
    ("cut to nothing", |p| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(0)
            .unwrap();
    }),
    ("deleted", |p| std::fs::remove_file(p).unwrap()),
];

#[test]
fn every_damaged_file_is_named_or_harmless() {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    build(&pristine);
    let files = store_files(&pristine);
    assert!(files.iter().any(|f| f == Path::new("sled/db")), "{files:?}");
    let mut outcomes = Vec::new();
    for (fi, file) in files.iter().enumerate() {
        for (di, (what, damage)) in DAMAGES.iter().enumerate() {
            let data = tmp.path().join(format!("case-{fi}-{di}"));
            copy_dir(&pristine, &data);
            damage(&data.join(file));
            let out = Command::new(env!("CARGO_BIN_EXE_weir"))
                .env("RUST_LOG", "off")
                .args(["status", "--data"])
                .arg(&data)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            let case = format!("{} {what}", file.display());
            match out.status.code() {
                Some(0) => {
                    // Harmless only if nothing was lost.
                    let (store, _) = Store::open(&data, settings()).unwrap_or_else(|e| {
                        panic!("{case}: status exited 0, the store does not open: {e}")
                    });
                    assert_eq!(
                        store.scan_keys("r/").unwrap().len(),
                        RECORDS,
                        "{case}: exit 0 with records lost"
                    );
                    outcomes.push(format!("{case}: harmless"));
                }
                Some(3) => {
                    let name = file.file_name().unwrap().to_string_lossy().into_owned();
                    assert!(
                        stderr.contains("damaged")
                            && (stderr.contains(&name) || stderr.contains("sled/")),
                        "{case}: exit 3 must name the file: {stderr}"
                    );
                    assert!(
                        !stderr.contains("backtrace ()"),
                        "{case}: sled's raw message: {stderr}"
                    );
                    outcomes.push(format!("{case}: refused"));
                }
                other => panic!("{case}: weir status exited {other:?} (want 0 or 3): {stderr}"),
            }
            std::fs::remove_dir_all(&data).unwrap();
        }
    }
    // The log itself cannot be damaged harmlessly every way.
    assert!(
        outcomes
            .iter()
            .any(|o| o.starts_with("sled/db") && o.ends_with("refused")),
        "{outcomes:#?}"
    );
    eprintln!("{}", outcomes.join("\n"));
}
