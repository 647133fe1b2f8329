//! A damaged store through the CLI (issue 13, item 3): `weir status`,
//! `weir inspect` and `weir run` on a store whose `sled/db` was truncated
//! past its first segment (the issue's `truncate -s 5216813`), or had bytes
//! flipped, exit 3 with a message that names the file; never 101 (a
//! panic) or 2.

use std::path::Path;
use std::process::Command;

use weir::actors::store::{Commit, Durability, Store, StoreSettings};
use weir::core::queue::{Job, Op};

fn weir() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env("RUST_LOG", "off");
    c
}

/// A store of several MiB (sled/db spans many 512 KiB segments), closed.
fn build(dir: &Path) -> u64 {
    let settings = StoreSettings {
        durability: Durability::Flush,
        reserve_file_bytes: 0,
        ..StoreSettings::default()
    };
    let (store, _) = Store::open(dir, settings).expect("a new store opens");
    for chunk in 0..80 {
        let puts: Vec<(String, Vec<u8>)> = (0..50)
            .map(|j| (format!("r/{chunk}/{j}"), vec![1u8; 1_500]))
            .collect();
        store.put_batch(&puts, &[]).unwrap();
        let ops: Vec<Op> = (0..20)
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
    std::fs::metadata(dir.join("sled/db")).unwrap().len()
}

/// Damage done to a file of the given length.
type Damage = fn(&Path, u64);

#[test]
fn cli_on_a_damaged_store_exits_3_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let def = tmp.path().join("g.toml");
    std::fs::write(
        &def,
        "name = \"g\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    // Each row: what is done to sled/db.
    let damages: &[(&str, Damage)] = &[
        ("truncated past the first segment", |db, len| {
            let cut = 5_216_813u64.min(len / 2 + 13);
            let f = std::fs::OpenOptions::new().write(true).open(db).unwrap();
            f.set_len(cut).unwrap();
        }),
        ("its header flipped", |db, _| {
            let mut bytes = std::fs::read(db).unwrap();
            for b in &mut bytes[..32] {
                *b = !*b;
            }
            std::fs::write(db, bytes).unwrap();
        }),
    ];
    for (i, (what, damage)) in damages.iter().enumerate() {
        for command in ["status", "inspect", "run"] {
            let data = tmp.path().join(format!("data-{i}-{command}"));
            let len = build(&data);
            assert!(len > 1 << 20, "sled/db of {len} bytes spans segments");
            damage(&data.join("sled/db"), len);
            let mut c = weir();
            match command {
                "run" => c.arg("run").arg(&def).arg("--until-idle"),
                other => c.arg(other),
            };
            let out = c.arg("--data").arg(&data).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            if *what == "its header flipped" && out.status.code() == Some(0) {
                // sled keeps copies of its segment headers and may rewrite
                // a flipped one (seen under load): then the store must be
                // whole — every record of `build` still there.
                let (store, _) = Store::open(
                    &data,
                    StoreSettings {
                        reserve_file_bytes: 0,
                        ..StoreSettings::default()
                    },
                )
                .unwrap_or_else(|e| {
                    panic!("#{i}: weir {command} exited 0 on a store that does not open: {e}")
                });
                assert_eq!(
                    store.scan_keys("r/").unwrap().len(),
                    80 * 50,
                    "#{i}: weir {command}: exit 0 and records lost"
                );
                continue;
            }
            assert_eq!(
                out.status.code(),
                Some(3),
                "#{i}: sled/db {what}: weir {command}: want exit 3, got {:?}; stderr: {stderr}",
                out.status
            );
            assert!(
                stderr.contains("sled/db") && stderr.contains("damaged"),
                "#{i}: sled/db {what}: weir {command}: the message names the file: {stderr}"
            );
            assert!(
                !stderr.contains("backtrace ()"),
                "#{i}: sled/db {what}: weir {command}: sled's raw message: {stderr}"
            );
            // The panic sled raises on the damage is caught and refused;
            // the panic hook must not print it (nor a backtrace) first.
            assert!(
                !stderr.contains("panicked at") && !stderr.contains("stack backtrace"),
                "#{i}: sled/db {what}: weir {command}: the panic hook printed sled's panic: {stderr}"
            );
        }
    }
}
