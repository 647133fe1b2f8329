//! docs/definitions.md against the parser: every ```toml block of the
//! reference must be accepted as `weir run` would accept it (whole files as
//! they are; ```toml fragment blocks inside a minimal graph), and every
//! field the format has must be named in the reference, so the reference
//! cannot drift from `src/definition/file.rs`.

use std::path::{Path, PathBuf};

use weir::definition;

fn reference() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/definitions.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fenced block: its info string, its first line (from 1) and its text.
struct Block {
    info: String,
    line: usize,
    text: String,
}

fn blocks(md: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in md.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_string(),
                    line: i + 2,
                    text: String::new(),
                })
            }
            (Some(_), Some(_)) => out.push(open.take().expect("open")),
            (Some(b), None) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a block is not closed");
    out
}

/// A folder like the examples': a `scripts/` directory beside the file.
fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("scripts")).unwrap();
    dir
}

fn load(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    let file: PathBuf = dir.join(name);
    std::fs::write(&file, text).unwrap();
    definition::load(&file)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn every_toml_example_of_the_reference_validates() {
    let md = reference();
    let all = blocks(&md);
    let toml: Vec<&Block> = all.iter().filter(|b| b.info.starts_with("toml")).collect();
    assert!(
        toml.iter().filter(|b| b.info == "toml").count() >= 2
            && toml.iter().filter(|b| b.info == "toml fragment").count() >= 4,
        "the reference lost its examples"
    );
    for b in toml {
        let dir = folder();
        let result = match b.info.as_str() {
            "toml" => load(dir.path(), "example.toml", &b.text),
            "toml fragment" => {
                let text = format!(
                    "name = \"doc\"\n{}\n[[nodes]]\nname = \"doc-minimal\"\ncommand = [\"true\"]\n",
                    b.text
                );
                load(dir.path(), "fragment.toml", &text)
            }
            other => panic!(
                "docs/definitions.md:{}: unknown block kind {other:?}",
                b.line
            ),
        };
        if let Err(e) = result {
            panic!(
                "docs/definitions.md:{}: the ```{} example does not validate:\n{e}\n{}",
                b.line, b.info, b.text
            );
        }
    }
}

#[test]
fn the_reference_has_an_error_example_the_parser_gives() {
    // The Errors section shows the shape of a fault line; make sure the
    // parser still words a bad duration that way.
    let dir = folder();
    let e = load(
        dir.path(),
        "etl.toml",
        "name = \"etl\"\n[[nodes]]\nname = \"extract\"\ncommand = [\"true\"]\ntimeout = \"soon\"\n",
    )
    .unwrap_err();
    assert!(
        e.contains("etl.toml:2: node \"extract\": field timeout: duration \"soon\""),
        "{e}"
    );
    assert!(
        reference().contains("node \"extract\": field timeout: duration \"soon\""),
        "the reference's error example changed"
    );
}

/// The fields a table of the format accepts, as the parser lists them when
/// it meets one it does not know.
fn fields_of(text: &str) -> Vec<String> {
    let err = toml::from_str::<definition::GraphFile>(text)
        .err()
        .unwrap_or_else(|| panic!("{text} was accepted"))
        .to_string();
    // "expected one of `a`, `b`" or "expected `a` or `b`".
    let list = err
        .split("not_a_field`, expected ")
        .nth(1)
        .unwrap_or_else(|| panic!("no field list in {err}"));
    list.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, f)| f.to_string())
        .collect()
}

#[test]
fn every_field_of_the_format_is_in_the_reference() {
    let md = reference();
    let node = "name = \"g\"\n[[nodes]]\nname = \"n\"\ncommand = [\"true\"]\n";
    let tables = [
        ("graph", "name = \"g\"\nnot_a_field = 1\n".to_string()),
        (
            "[[nodes]]",
            "name = \"g\"\n[[nodes]]\nname = \"n\"\nnot_a_field = 1\n".to_string(),
        ),
        ("retry", format!("{node}retry = {{ not_a_field = 1 }}\n")),
        (
            "[targets.X]",
            "name = \"g\"\n[targets.t]\nnot_a_field = 1\n".to_string(),
        ),
        (
            "[keyed]",
            "name = \"g\"\n[keyed]\ninventory = { file = \"k\" }\nnot_a_field = 1\n".to_string(),
        ),
        (
            "keyed.inventory",
            "name = \"g\"\n[keyed]\ninventory = { not_a_field = 1 }\n".to_string(),
        ),
        ("sensor", format!("{node}sensor = {{ not_a_field = 1 }}\n")),
        (
            "[trigger]",
            "name = \"g\"\n[trigger]\nnot_a_field = 1\n".to_string(),
        ),
        (
            "keyed.debounce",
            "name = \"g\"\n[keyed]\ninventory = { file = \"k\" }\ndebounce = { not_a_field = 1 }\n"
                .to_string(),
        ),
    ];
    for (table, text) in tables {
        let fields = fields_of(&text);
        // [trigger] has one field; every other table several.
        let least = if table == "[trigger]" { 1 } else { 2 };
        assert!(fields.len() >= least, "{table}: fields {fields:?}");
        for f in fields {
            assert!(
                md.contains(&format!("`{f}`"))
                    || md.contains(&format!("[{f}]"))
                    || md.contains(&format!("[{f}."))
                    || md.contains(&format!("[[{f}]]")),
                "docs/definitions.md does not describe field {f:?} of {table}"
            );
        }
    }
}
