//! The clients' copies of the contract, generated from the server's: the
//! refusal reasons of `proto/proto/raftlock/v1/reasons.proto` (through
//! [`raftlock_proto::reason::Reason`], which the proto crate's build
//! generates from that file) as Go, TypeScript and Python tables. A test
//! compares the committed files with these, so a client cannot drift from
//! the server; `REWRITE_CONTRACT=1 cargo test -p raftlock-tests --test api
//! contract` rewrites them.

use raftlock_proto::reason::Reason;
use std::fmt::Write as _;

/// A generated file: its path from the workspace root and its text.
pub struct Generated {
    /// From the workspace root.
    pub path: &'static str,
    /// The whole file.
    pub text: String,
}

/// Every generated client file.
pub fn files() -> Vec<Generated> {
    vec![
        Generated {
            path: "clients/go/reasons_gen.go",
            text: go(),
        },
        Generated {
            path: "clients/go/reasons_gen_test.go",
            text: go_test(),
        },
        Generated {
            path: "clients/typescript/src/reasons.ts",
            text: typescript(),
        },
        Generated {
            path: "clients/python/src/raftlock/_reasons.py",
            text: python(),
        },
        Generated {
            path: "clients/java/src/main/java/io/github/raftlock/Reason.java",
            text: java(),
        },
    ]
}

const SOURCE: &str = "proto/proto/raftlock/v1/reasons.proto";
const HOW: &str = "REWRITE_CONTRACT=1 cargo test -p raftlock-tests --test api contract";

/// Go's spelling of a reason's words (`TTL_OUT_OF_RANGE` → `TTLOutOfRange`):
/// initialisms stay upper case, as Go names them.
fn go_name(r: Reason) -> String {
    r.as_str()
        .split('_')
        .map(|w| match w {
            "TTL" | "ID" | "HTTP" | "URL" => w.to_owned(),
            _ => w[..1].to_owned() + &w[1..].to_lowercase(),
        })
        .collect()
}

/// `text` cut into lines of at most `width` characters after `prefix`.
fn wrap(prefix: &str, text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            let _ = writeln!(out, "{prefix}{line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{prefix}{line}");
    }
    out
}

fn go() -> String {
    let mut s = format!(
        "// Code generated from {SOURCE} by tests/src/contract.rs ({HOW}). DO NOT EDIT.\n\n\
         package raftlock\n\n\
         // Reasons the server sends in the \"reason\" field of a refusal, in wire\n\
         // form. Match errors with errors.Is and the Err* sentinels rather than\n\
         // comparing these strings.\n\
         const (\n"
    );
    // A blank line between entries keeps gofmt from aligning them.
    for (i, r) in Reason::ALL.into_iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s += &wrap(
            "\t// ",
            &format!(
                "Reason{}: {} (gRPC code {}.)",
                go_name(r),
                r.doc(),
                r.code_name()
            ),
            70,
        );
        let _ = writeln!(s, "\tReason{} = {:?}", go_name(r), r.as_str());
    }
    s += ")\n\n// Sentinels, one per server reason, for errors.Is.\nvar (\n";
    for (i, r) in Reason::ALL.into_iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        s += &wrap("\t// ", &format!("Err{}: {}", go_name(r), r.doc()), 70);
        let _ = writeln!(s, "\tErr{0} error = reason(Reason{0})", go_name(r));
    }
    s += ")\n";
    s
}

fn go_test() -> String {
    let mut s = format!(
        "// Code generated from {SOURCE} by tests/src/contract.rs ({HOW}). DO NOT EDIT.\n\n\
         package raftlock\n\n\
         // reasonSentinels pairs every generated sentinel with the wire reason it\n\
         // must match.\n\
         var reasonSentinels = []struct {{\n\terr    error\n\treason string\n}}{{\n"
    );
    for r in Reason::ALL {
        let _ = writeln!(s, "\t{{Err{}, {:?}}},", go_name(r), r.as_str());
    }
    s += "}\n";
    s
}

fn typescript() -> String {
    let mut s = format!(
        "// Generated from {SOURCE} by tests/src/contract.rs\n\
         // ({HOW}); do not edit.\n\n\
         /**\n * Every reason the server sends, in wire form.\n *\n * @example\n * ```ts\n\
         \x20* const r: Reason = \"STALE_TOKEN\";\n * ```\n */\nexport type Reason =\n"
    );
    for (i, r) in Reason::ALL.iter().enumerate() {
        let end = if i + 1 == Reason::ALL.len() { ";" } else { "" };
        let _ = writeln!(s, "  | {:?}{end}", r.as_str());
    }
    s += "\n/**\n * All reasons, for exhaustive checks.\n *\n * @example\n * ```ts\n\
          \x20* REASONS.includes(\"NOT_HOLDER\"); // true\n * ```\n */\n\
          export const REASONS: readonly Reason[] = [\n";
    for r in Reason::ALL {
        let _ = writeln!(s, "  {:?},", r.as_str());
    }
    s += "];\n\n/**\n * The gRPC code each reason travels with, by name.\n *\n * @example\n * ```ts\n\
          \x20* REASON_CODES.STALE_TOKEN; // \"FAILED_PRECONDITION\"\n * ```\n */\n\
          export const REASON_CODES: Readonly<Record<Reason, string>> = {\n";
    for r in Reason::ALL {
        let _ = writeln!(s, "  {}: {:?},", r.as_str(), r.code_name());
    }
    s += "};\n";
    s
}

fn python() -> String {
    let mut s = format!(
        "# Generated from {SOURCE} by tests/src/contract.rs\n\
         # ({HOW}); do not edit.\n\
         \"\"\"The refusal reasons the server sends, with the gRPC code of each.\"\"\"\n\n\
         #: The gRPC code name each reason travels with.\n\
         CODES: dict[str, str] = {{\n"
    );
    for r in Reason::ALL {
        let _ = writeln!(s, "    {:?}: {:?},", r.as_str(), r.code_name());
    }
    s += "}\n";
    s
}

/// A reason's doc as Javadoc text: HTML's special characters escaped, and
/// Markdown's `code` spans as `{@code}`.
fn javadoc(text: &str) -> String {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let mut out = String::new();
    for (i, part) in escaped.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "{{@code {part}}}");
        } else {
            out.push_str(part);
        }
    }
    out
}

fn java() -> String {
    let mut s = format!(
        "// Generated from {SOURCE} by tests/src/contract.rs\n\
         // ({HOW}); do not edit.\n\n\
         package io.github.raftlock;\n\n\
         /**\n\
         \x20* Every reason the server gives for a refusal, as every error of this client\n\
         \x20* carries it ({{@link RaftlockException#reason()}}): match on these, never on\n\
         \x20* messages. A reason this client does not know (a newer server's) is\n\
         \x20* {{@link #UNKNOWN}}.\n\
         \x20*\n\
         \x20* <pre>{{@code\n\
         \x20* try {{\n\
         \x20*     lock.unlock();\n\
         \x20* }} catch (RaftlockException e) {{\n\
         \x20*     if (e.reason() == Reason.NOT_HOLDER) {{\n\
         \x20*         // the lease had already ended\n\
         \x20*     }}\n\
         \x20* }}\n\
         \x20* }}</pre>\n\
         \x20*/\n\
         public enum Reason {{\n"
    );
    for r in Reason::ALL {
        s += "    /**\n";
        s += &wrap(
            "     * ",
            &format!("{} (gRPC code {}.)", javadoc(r.doc()), r.code_name()),
            72,
        );
        s += "     */\n";
        let _ = writeln!(s, "    {0}({0:?}, {1:?}),\n", r.as_str(), r.code_name());
    }
    s += "    /** A reason this client does not know: a newer server's. */\n\
          \x20   UNKNOWN(\"\", \"UNKNOWN\");\n\n\
          \x20   private final String wire;\n\
          \x20   private final String grpcCode;\n\n\
          \x20   Reason(String wire, String grpcCode) {\n\
          \x20       this.wire = wire;\n\
          \x20       this.grpcCode = grpcCode;\n\
          \x20   }\n\n\
          \x20   /**\n\
          \x20    * The reason as the server spells it ({@code \"STALE_TOKEN\"}); empty for\n\
          \x20    * {@link #UNKNOWN}.\n\
          \x20    *\n\
          \x20    * @return the wire form\n\
          \x20    */\n\
          \x20   public String wire() {\n\
          \x20       return wire;\n\
          \x20   }\n\n\
          \x20   /**\n\
          \x20    * The gRPC status code this reason travels with, by name\n\
          \x20    * ({@code \"FAILED_PRECONDITION\"}).\n\
          \x20    *\n\
          \x20    * @return the code's name\n\
          \x20    */\n\
          \x20   public String grpcCode() {\n\
          \x20       return grpcCode;\n\
          \x20   }\n\n\
          \x20   /**\n\
          \x20    * The reason for a wire string: {@code Reason.fromWire(\"NOT_HOLDER\")} is\n\
          \x20    * {@link #NOT_HOLDER}; anything this client does not know is\n\
          \x20    * {@link #UNKNOWN}.\n\
          \x20    *\n\
          \x20    * @param wire the reason as the server sent it, or null\n\
          \x20    * @return the reason\n\
          \x20    */\n\
          \x20   public static Reason fromWire(String wire) {\n\
          \x20       if (wire == null || wire.isEmpty()) {\n\
          \x20           return UNKNOWN;\n\
          \x20       }\n\
          \x20       for (Reason r : values()) {\n\
          \x20           if (r.wire.equals(wire)) {\n\
          \x20               return r;\n\
          \x20           }\n\
          \x20       }\n\
          \x20       return UNKNOWN;\n\
          \x20   }\n\
          }\n";
    s
}
