//! `weir validate` and `weir run` reading definitions: every fault of a
//! file on its own line with its place, the checks of the engine `run`
//! opens (pools, tasks) made by `validate` too, and a definition given by a
//! bare file name running in its own folder.

use std::path::Path;
use std::process::{Command, Output};

fn weir(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env("RUST_LOG", "warn").current_dir(dir);
    c
}

fn validate(dir: &Path, file: &str, text: &str) -> Output {
    std::fs::write(dir.join(file), text).unwrap();
    weir(dir).args(["validate", file]).output().unwrap()
}

/// The lines of stderr that report a fault.
fn faults(o: &Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.starts_with("weir: definition"))
        .map(str::to_string)
        .collect()
}

fn explain(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn three_faults_are_three_lines_each_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"name = "three"

[[nodes]]
name = "a"
command = ["true"]
timeout = "soon"

[[nodes]]
name = "b"
upstreams = ["a"]
command = ["true"]
trigger_rule = "whenever"

[[nodes]]
name = "c"
upstreams = ["b"]
pool = "gpu"
command = ["true"]
"#;
    let o = validate(dir.path(), "three.toml", text);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    let lines = faults(&o);
    assert_eq!(lines.len(), 3, "{}", explain(&o));
    let want = [
        ("three.toml:3:", "field timeout"),
        ("three.toml:8:", "field trigger_rule"),
        ("three.toml:14:", "pool \"gpu\" is not declared"),
    ];
    for (line, (place, says)) in lines.iter().zip(want) {
        assert!(line.contains(place), "{line:?} does not name {place:?}");
        assert!(line.contains(says), "{line:?} does not say {says:?}");
    }
    assert!(
        String::from_utf8_lossy(&o.stdout).is_empty(),
        "{}",
        explain(&o)
    );
}

#[test]
fn what_run_refuses_validate_refuses_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    // No [pools] in the file: the pool is known to no engine weir opens;
    // a task other than command has no one to run it.
    let text = r#"name = "refused"

[[nodes]]
name = "a"
pool = "gpu"
command = ["true"]

[[nodes]]
name = "b"
task = "send_mail"
"#;
    let o = validate(dir.path(), "refused.toml", text);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    let lines = faults(&o);
    assert_eq!(lines.len(), 2, "{}", explain(&o));
    assert!(
        lines[0].contains("refused.toml:3:") && lines[0].contains("pool \"gpu\""),
        "{lines:?}"
    );
    assert!(
        lines[1].contains("refused.toml:8:")
            && lines[1].contains("task \"send_mail\" is not registered"),
        "{lines:?}"
    );
    let data = dir.path().join("data");
    let o = weir(dir.path())
        .args(["run", "refused.toml", "--until-idle", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("refused.toml:3:"),
        "{}",
        explain(&o)
    );
    assert!(!data.exists(), "a refused definition opened a store");
}

#[test]
fn a_pool_declared_by_another_file_of_the_folder_is_known() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.toml"),
        "name = \"a\"\n[pools]\ngpu = 1\n[[nodes]]\nname = \"n\"\npool = \"gpu\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.toml"),
        "name = \"b\"\n[[nodes]]\nname = \"n\"\npool = \"gpu\"\ncommand = [\"true\"]\n",
    )
    .unwrap();
    let o = weir(dir.path()).args(["validate", "."]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("2 graph(s) valid"),
        "{}",
        explain(&o)
    );
}

#[test]
fn top_level_faults_carry_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"name = "top"
partitioning = "daily"
cron = "0 25 * * *"
retention = "a week"
max_active_runs = 0

[[nodes]]
name = "a"
command = ["true"]
"#;
    let o = validate(dir.path(), "top.toml", text);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    let lines = faults(&o);
    let want = [
        ("top.toml:3:", "cron"),
        ("top.toml:4:", "retention"),
        ("top.toml:5:", "max_active_runs"),
    ];
    assert_eq!(lines.len(), want.len(), "{}", explain(&o));
    for (line, (place, says)) in lines.iter().zip(want) {
        assert!(
            line.contains(place) && line.contains(says),
            "{line:?} is not {place} {says}"
        );
    }
    // A graph-level fault the graph's own validation finds (a cron on an
    // unpartitioned graph) points at the field too.
    let o = validate(
        dir.path(),
        "cron.toml",
        "name = \"cron\"\n\ncron = \"0 2 * * *\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n",
    );
    let lines = faults(&o);
    assert_eq!(lines.len(), 1, "{}", explain(&o));
    assert!(lines[0].contains("cron.toml:3:"), "{lines:?}");
    let o = validate(
        dir.path(),
        "part.toml",
        "name = \"part\"\npartitioning = \"yearly\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n",
    );
    let lines = faults(&o);
    assert_eq!(lines.len(), 1, "{}", explain(&o));
    assert!(
        lines[0].contains("part.toml:2:") && lines[0].contains("partitioning"),
        "{lines:?}"
    );
}

#[test]
fn bad_env_names_and_a_missing_cwd_are_faults() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("scripts")).unwrap();
    let text = r#"name = "env"

[[nodes]]
name = "a"
command = ["true"]
env = { "A=B" = "x", "OK" = "fine" }

[[nodes]]
name = "b"
command = ["true"]
env = { "NUL\u0000" = "x" }

[[nodes]]
name = "c"
command = ["true"]
cwd = "nowhere"

[[nodes]]
name = "d"
command = ["true"]
cwd = "scripts"
"#;
    let o = validate(dir.path(), "env.toml", text);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    let lines = faults(&o);
    let want = [
        ("env.toml:3:", "field env"),
        ("env.toml:8:", "field env"),
        ("env.toml:13:", "field cwd"),
    ];
    assert_eq!(lines.len(), want.len(), "{}", explain(&o));
    for (line, (place, says)) in lines.iter().zip(want) {
        assert!(
            line.contains(place) && line.contains(says),
            "{line:?} is not {place} {says}"
        );
    }
}

#[test]
fn a_syntax_error_is_one_fault() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        "name = \"syntax\"\n\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"\ntimeout = \"soon\"\n";
    let o = validate(dir.path(), "syntax.toml", text);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    let lines = faults(&o);
    assert_eq!(lines.len(), 1, "{}", explain(&o));
    assert!(lines[0].contains("syntax.toml:"), "{lines:?}");
}

#[test]
fn a_bare_file_name_runs_in_its_own_folder() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("job");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("step.sh"), "pwd > where.txt\n").unwrap();
    std::fs::write(
        folder.join("job.toml"),
        "name = \"job\"\n\n[[nodes]]\nname = \"step\"\ncommand = [\"sh\", \"step.sh\"]\nretry = { attempts = 1 }\n",
    )
    .unwrap();
    let o = weir(&folder)
        .args([
            "run",
            "job.toml",
            "--until-idle",
            "--durability",
            "none",
            "--data",
        ])
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    let wrote = std::fs::read_to_string(folder.join("where.txt")).unwrap();
    assert_eq!(
        Path::new(wrote.trim()),
        std::fs::canonicalize(&folder).unwrap(),
        "the command ran elsewhere"
    );
}

/// Issue #29: a graph's timezone. `weir validate` names the zone, the tz
/// database, how windows are named (with offsets for hours) and the next
/// firing in local time; a zone name that is not IANA's is a fault on
/// its line, with the right spelling when only the case is wrong; and the
/// zone is part of the definition's hash (UTC spelled out is the default).
#[test]
fn a_timezone_is_shown_checked_and_hashed() {
    let dir = tempfile::tempdir().unwrap();
    let graph = |tz: &str, partitioning: &str| {
        format!(
            "name = \"tz\"\npartitioning = \"{partitioning}\"\ncron = \"30 2 * * *\"\n{tz}\n\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n"
        )
    };
    let o = validate(
        dir.path(),
        "tz.toml",
        &graph("timezone = \"Europe/Berlin\"", "hourly"),
    );
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        text.contains("timezone Europe/Berlin (tz database 20"),
        "{text}"
    );
    // Hours carry their offset (+01:00 or +02:00 by season).
    let named = text
        .lines()
        .find(|l| l.contains("windows are named like"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        named.contains(":00+01:00 ..") || named.contains(":00+02:00 .."),
        "{named}"
    );
    let firing = text
        .lines()
        .find(|l| l.contains("cron fires next at"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        firing.contains("T02:30:00+0") || firing.contains("T03:00:00+02:00"),
        "{firing}"
    );
    let hash = |o: &Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find_map(|l| l.trim().strip_prefix("definition ").map(str::to_string))
            .unwrap()
    };
    let berlin = hash(&o);
    let none = hash(&validate(dir.path(), "tz.toml", &graph("", "hourly")));
    let utc = hash(&validate(
        dir.path(),
        "tz.toml",
        &graph("timezone = \"UTC\"", "hourly"),
    ));
    let ny = hash(&validate(
        dir.path(),
        "tz.toml",
        &graph("timezone = \"America/New_York\"", "hourly"),
    ));
    assert_eq!(none, utc, "UTC spelled out is the default");
    assert_ne!(none, berlin);
    assert_ne!(berlin, ny);

    let o = validate(
        dir.path(),
        "tz.toml",
        &graph("timezone = \"europe/berlin\"", "daily"),
    );
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    let f = faults(&o);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].contains("tz.toml:4:") && f[0].contains("did you mean \"Europe/Berlin\""),
        "{f:?}"
    );
}

#[test]
fn artifact_names_that_leave_their_folder_are_refused_with_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"name = "arts"

[[nodes]]
name = "a"
command = ["true"]
artifacts = ["../up.csv"]

[[nodes]]
name = "b"
upstreams = ["a"]
command = ["cat", "{upstream.a.artifact./etc/passwd}"]

[[nodes]]
name = "c"
http = { url = "http://127.0.0.1:9/x" }
artifacts = ["x.csv"]

[[nodes]]
name = "d"
command = ["true"]
artifacts = ["a\u0000b"]

[[nodes]]
name = "e"
command = ["true"]
artifacts = ["reports/[oops"]

[[nodes]]
name = "f"
command = ["true"]
artifacts = ["ok.csv"]
artifact_bytes_max = "10 bananas"

[[nodes]]
name = "g"
command = ["true"]
artifacts = ["ok.csv", "reports/*.html", "**/*.json"]
artifacts_bytes_max = "1GiB"
"#;
    let o = validate(dir.path(), "arts.toml", text);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    let lines = faults(&o);
    let want = [
        ("arts.toml:3:", "\"..\" segment"),
        ("arts.toml:8:", "is absolute"),
        ("arts.toml:13:", "artifacts belong to command nodes"),
        ("arts.toml:18:", "control character"),
        ("arts.toml:23:", "is not a glob"),
        ("arts.toml:28:", "bananas"),
    ];
    assert_eq!(lines.len(), want.len(), "{}", explain(&o));
    for (line, (place, says)) in lines.iter().zip(want) {
        assert!(
            line.contains(place) && line.contains(says),
            "{line:?} is not {place} {says}"
        );
    }
}
