//! Scenario tests written as data: `tests/scenarios/*.txt` list commands
//! with the log index they are applied at, each followed by the outcome the
//! state machine must print (see `Outcome`'s `Display`). A reviewer can read
//! the tricky cases without reading Rust.
//!
//! ```text
//! # comment
//! 3: acquire session=1 lock=a req=7 wait=1000
//! ok queued position=0
//! ```
//!
//! `REWRITE_SCENARIOS=1 cargo test -p raftlock-store --test scenarios`
//! rewrites the expected outcomes from what the machine does now; review the
//! diff before committing it.

use raftlock_store::machine::{Command, Downgrade, LeaseMachine, Mode, RequestId};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

fn parse_command(text: &str) -> Result<Command, String> {
    let mut words = text.split_whitespace();
    let verb = words.next().ok_or("empty command")?;
    let args: BTreeMap<&str, &str> = words
        .map(|w| {
            w.split_once('=')
                .ok_or(format!("argument {w:?} is not key=value"))
        })
        .collect::<Result<_, _>>()?;
    let num = |k: &str| -> Result<u64, String> {
        args.get(k)
            .ok_or(format!("{verb}: missing {k}="))?
            .parse()
            .map_err(|e| format!("{verb}: {k}: {e}"))
    };
    let text = |k: &str| -> Result<String, String> {
        args.get(k)
            .map(|s| s.to_string())
            .ok_or(format!("{verb}: missing {k}="))
    };
    Ok(match verb {
        "create-session" => Command::CreateSession {
            ttl_ms: num("ttl")?,
            client_name: args.get("name").unwrap_or(&"").to_string(),
            owner: args.get("owner").unwrap_or(&"").to_string(),
        },
        "close-session" => Command::CloseSession {
            session: num("session")?,
        },
        "expire" => Command::ExpireSessions {
            sessions: text("sessions")?
                .split(',')
                .map(|s| s.parse().map_err(|e| format!("expire: {e}")))
                .collect::<Result<_, _>>()?,
        },
        "acquire" => Command::Acquire {
            session: num("session")?,
            name: text("lock")?,
            request_id: RequestId(num("req")? as u128),
            mode: match args.get("mode") {
                Some(&"s") => Mode::Shared,
                None | Some(&"x") => Mode::Exclusive,
                Some(m) => return Err(format!("acquire: mode {m:?} is not x or s")),
            },
            permits: args
                .contains_key("permits")
                .then(|| num("permits"))
                .transpose()?
                .map(|p| p as u32),
            wait_ms: args.contains_key("wait").then(|| num("wait")).transpose()?,
            metadata: args.get("meta").unwrap_or(&"").as_bytes().to_vec(),
        },
        "release" => Command::Release {
            session: num("session")?,
            name: text("lock")?,
            token: num("token")?,
        },
        "cancel-wait" => Command::CancelWait {
            session: num("session")?,
            name: text("lock")?,
            request_id: RequestId(num("req")? as u128),
        },
        "proclaim" => Command::Proclaim {
            session: num("session")?,
            name: text("lock")?,
            token: num("token")?,
            value: text("value")?.into_bytes(),
        },
        "downgrade" => Command::Downgrade(Downgrade {
            session: num("session")?,
            name: text("lock")?,
            token: num("token")?,
        }),
        "force-release" => Command::ForceRelease {
            name: text("lock")?,
        },
        other => return Err(format!("unknown command {other:?}")),
    })
}

/// Runs one file; returns the file as it should read (for rewriting) and the
/// mismatches found.
fn run(path: &Path) -> (String, Vec<String>) {
    let source = fs::read_to_string(path).expect("scenario file is readable");
    let mut machine = LeaseMachine::default();
    let mut rewritten = String::new();
    let mut failures = Vec::new();
    let mut lines = source.lines().peekable();
    let mut last_index = 0;
    while let Some(line) = lines.next() {
        let Some((index, cmd)) = line
            .split_once(':')
            .and_then(|(i, c)| i.trim().parse::<u64>().ok().map(|i| (i, c)))
        else {
            rewritten.push_str(line);
            rewritten.push('\n');
            continue;
        };
        rewritten.push_str(line);
        rewritten.push('\n');
        assert!(
            index > last_index,
            "{}: index {index} does not grow",
            path.display()
        );
        last_index = index;
        let mut expected = Vec::new();
        while let Some(next) = lines.peek() {
            if next.starts_with("ok ") || next.starts_with("err ") || next.starts_with("  ") {
                expected.push(lines.next().unwrap_or_default().to_string());
            } else {
                break;
            }
        }
        let actual = match parse_command(cmd) {
            Ok(c) => machine.apply(&c, index, index * 10).to_string(),
            Err(e) => panic!("{}: line {line:?}: {e}", path.display()),
        };
        if actual != expected.join("\n") {
            failures.push(format!(
                "{}\n  at {line}\n  expected:\n{}\n  actual:\n{}",
                path.display(),
                expected.join("\n"),
                actual
            ));
        }
        rewritten.push_str(&actual);
        rewritten.push('\n');
    }
    (rewritten, failures)
}

#[test]
fn scenarios() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .expect("tests/scenarios exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "expected the scenario files in {}",
        dir.display()
    );
    let rewrite = std::env::var_os("REWRITE_SCENARIOS").is_some();
    let mut failures = Vec::new();
    for f in &files {
        let (text, fails) = run(f);
        if rewrite {
            fs::write(f, text).expect("scenario file is writable");
        } else {
            failures.extend(fails);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
