//! The memory trees against sled's: the same operations give the same
//! answers, for every call the store makes.

use sled::transaction::ConflictableTransactionError;

use super::*;

/// One tree of each kind, opened the way the store opens them.
fn both() -> (sled::Db, [Tree; 2]) {
    let db = sled::Config::new().temporary(true).open().expect("sled");
    let sled_tree = Db::Sled(db.clone()).open_tree("t").expect("tree");
    let mem = Db::Memory(MemoryStore::new()).open_tree("t").expect("tree");
    (db, [sled_tree, mem])
}

fn entries(i: impl Iterator<Item = sled::Result<(IVec, IVec)>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    i.map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .expect("iterates")
}

#[test]
fn reads_and_scans_agree_with_sled() {
    let (_db, trees) = both();
    let mut answers = Vec::new();
    for t in &trees {
        for k in [
            &b"a"[..],
            b"ab",
            b"abc",
            b"b",
            b"\xff",
            b"\xff\xff",
            b"c\x00",
        ] {
            t.insert(k, k.to_vec()).expect("insert");
        }
        let old = t
            .insert(b"ab", &b"AB"[..])
            .expect("insert")
            .map(|v| v.to_vec());
        let removed = t.remove(b"b").expect("remove").map(|v| v.to_vec());
        let missing = t.remove(b"zz").expect("remove");
        let mut batch = Batch::default();
        batch.insert(&b"d"[..], &b"D"[..]);
        batch.insert(&b"e"[..], &b"E"[..]);
        batch.remove(&b"e"[..]);
        batch.remove(&b"a"[..]);
        t.apply_batch(batch).expect("batch");
        answers.push(vec![
            format!("old {old:?}"),
            format!("removed {removed:?}"),
            format!("missing {missing:?}"),
            format!("get {:?}", t.get(b"ab").expect("get")),
            format!("iter {:?}", entries(t.iter())),
            format!("rev {:?}", entries(t.iter().rev())),
            format!("prefix ab {:?}", entries(t.scan_prefix(b"ab"))),
            format!("prefix ff {:?}", entries(t.scan_prefix(b"\xff"))),
            format!("prefix empty {:?}", entries(t.scan_prefix(b""))),
            format!("range {:?}", entries(t.range(&b"ab"[..]..&b"c\x00"[..]))),
            format!("range to {:?}", entries(t.range(..&b"b"[..]))),
            format!("range from {:?}", entries(t.range(&b"b"[..]..))),
            format!("range crossed {:?}", entries(t.range(&b"d"[..]..&b"a"[..]))),
            format!(
                "last {:?}",
                t.last().expect("last").map(|(k, _)| k.to_vec())
            ),
            format!(
                "first {:?}",
                t.first().expect("first").map(|(k, _)| k.to_vec())
            ),
            format!("len {}", t.len()),
        ]);
    }
    assert_eq!(answers[0], answers[1]);
    // A mixed walk from both ends meets in the middle.
    for t in &trees {
        let mut it = t.iter();
        let first = it.next().expect("one").expect("ok").0;
        let last = it.next_back().expect("one").expect("ok").0;
        assert!(first < last);
        assert_eq!(it.count(), t.len() - 2);
        t.clear().expect("clear");
        assert!(t.is_empty());
    }
}

#[test]
fn a_transaction_reads_its_writes_and_an_abort_writes_nothing() {
    let (db, _) = both();
    let mem = Db::Memory(MemoryStore::new());
    for db in [Db::Sled(db), mem] {
        let (a, b) = (db.open_tree("a").unwrap(), db.open_tree("b").unwrap());
        a.insert(b"k", &b"0"[..]).unwrap();
        let seen = transaction2((&a, &b), |(a, b)| {
            a.insert(&b"k"[..], &b"1"[..])?;
            b.insert(&b"j"[..], &b"2"[..])?;
            let mut batch = Batch::default();
            batch.insert(&b"m"[..], &b"3"[..]);
            b.apply_batch(&batch)?;
            Ok::<_, ConflictableTransactionError<()>>((a.get(b"k")?, b.get(b"m")?))
        })
        .expect("commits");
        assert_eq!(
            seen,
            (Some(IVec::from(&b"1"[..])), Some(IVec::from(&b"3"[..])))
        );
        assert_eq!(b.len(), 2);
        let aborted = transaction2((&a, &b), |(a, b)| {
            a.remove(&b"k"[..])?;
            b.insert(&b"x"[..], &b"9"[..])?;
            Err::<(), _>(ConflictableTransactionError::Abort("no"))
        });
        assert!(matches!(
            aborted,
            Err(sled::transaction::TransactionError::Abort("no"))
        ));
        assert_eq!(a.get(b"k").unwrap(), Some(IVec::from(&b"1"[..])));
        assert_eq!(b.get(b"x").unwrap(), None);
    }
}

#[test]
fn a_memory_store_outlives_its_trees_and_counts_its_bytes() {
    let store = MemoryStore::new();
    {
        let t = Db::Memory(store.clone()).open_tree("t").unwrap();
        t.insert(b"key", &b"value"[..]).unwrap();
        t.insert(b"key", &b"v"[..]).unwrap();
        t.insert(b"gone", &b"x"[..]).unwrap();
        t.remove(b"gone").unwrap();
    }
    assert_eq!(store.bytes(), 4);
    let again = Db::Memory(store.clone()).open_tree("t").unwrap();
    assert_eq!(again.get(b"key").unwrap(), Some(IVec::from(&b"v"[..])));
    // Trees of two stores do not share a transaction.
    let other = Db::Memory(MemoryStore::new()).open_tree("t").unwrap();
    let mixed = transaction2((&again, &other), |_| {
        Ok::<_, ConflictableTransactionError<()>>(())
    });
    assert!(mixed.is_err());
    // A cleared tree holds no bytes.
    again.clear().unwrap();
    assert_eq!(store.bytes(), 0);
}

#[test]
fn long_scans_from_both_ends_agree_with_sled() {
    let (_db, trees) = both();
    let mut walks = Vec::new();
    for t in &trees {
        for i in 0u32..1_000 {
            t.insert(i.to_be_bytes(), &i.to_le_bytes()[..]).unwrap();
        }
        // Ends taken in an uneven pattern, so that each end's reads run
        // into what the other read and did not return.
        let mut it = t.range(&5u32.to_be_bytes()[..]..&990u32.to_be_bytes()[..]);
        let mut walk = Vec::new();
        let mut step = 0u32;
        loop {
            let item = if step % 7 < 5 {
                it.next()
            } else {
                it.next_back()
            };
            match item {
                Some(r) => walk.push(r.unwrap().0.to_vec()),
                None => break,
            }
            step += 1;
        }
        walk.sort();
        walk.dedup();
        walks.push((walk.len(), walk));
        // Writes made while a scan runs, past where it stands, are seen.
        let mut it = t.iter();
        let first = it.next().unwrap().unwrap().0;
        t.insert(2_000u32.to_be_bytes(), &b"late"[..]).unwrap();
        assert_eq!(first.as_ref(), &0u32.to_be_bytes());
        assert_eq!(
            it.next_back().unwrap().unwrap().0.as_ref(),
            &2_000u32.to_be_bytes()
        );
    }
    assert_eq!(walks[0], walks[1]);
    assert_eq!(walks[0].0, 985);
}
