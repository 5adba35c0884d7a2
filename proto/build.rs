//! Compiles the API with `protox` (a protobuf compiler in Rust), so building
//! raftlock needs no system `protoc`, and generates the table of refusal
//! reasons from `reasons.proto`, the one place a reason is declared.
use prost_reflect::{DescriptorPool, FileDescriptor, Value};
use std::{env, fmt::Write as _, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["raftlock/v1/raftlock.proto"];
    let fds = protox::compile(protos, ["proto"])?;
    // Kept for gRPC server reflection, so grpcurl can explore the API.
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(
        out.join("raftlock_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure().compile_fds(fds.clone())?;
    // serde in the proto3 JSON mapping (lowerCamelCase names, 64-bit
    // integers as strings, bytes as base64), for the HTTP API; unknown
    // fields are refused.
    pbjson_build::Builder::new()
        .register_descriptors(&prost::Message::encode_to_vec(&fds))?
        .out_dir(&out)
        .build(&[".raftlock.v1"])?;
    fs::write(out.join("reasons.rs"), reasons()?)?;
    fs::write(out.join("calls.rs"), calls()?)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}

/// `name` (under `proto/`) compiled with its comments.
fn compiled(name: &str) -> Result<(DescriptorPool, FileDescriptor), Box<dyn std::error::Error>> {
    let pool: DescriptorPool = protox::Compiler::new(["proto"])?
        .include_source_info(true)
        .open_files([name])?
        .descriptor_pool();
    let file = pool
        .get_file_by_name(name)
        .ok_or_else(|| format!("no {name}"))?;
    Ok((pool, file))
}

/// The comment before the element of `file` at `path`, on one line.
fn comment(file: &FileDescriptor, path: &[i32]) -> Option<String> {
    let text = file
        .file_descriptor_proto()
        .source_code_info
        .as_ref()?
        .location
        .iter()
        .find(|l| l.path == path)?
        .leading_comments
        .clone()?;
    Some(
        text.lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ")
            .trim()
            .to_owned(),
    )
}

/// gRPC's codes by their google.rpc.Code names.
const CODES: [(&str, &str); 16] = [
    ("CANCELLED", "Cancelled"),
    ("UNKNOWN", "Unknown"),
    ("INVALID_ARGUMENT", "InvalidArgument"),
    ("DEADLINE_EXCEEDED", "DeadlineExceeded"),
    ("NOT_FOUND", "NotFound"),
    ("ALREADY_EXISTS", "AlreadyExists"),
    ("PERMISSION_DENIED", "PermissionDenied"),
    ("RESOURCE_EXHAUSTED", "ResourceExhausted"),
    ("FAILED_PRECONDITION", "FailedPrecondition"),
    ("ABORTED", "Aborted"),
    ("OUT_OF_RANGE", "OutOfRange"),
    ("UNIMPLEMENTED", "Unimplemented"),
    ("INTERNAL", "Internal"),
    ("UNAVAILABLE", "Unavailable"),
    ("DATA_LOSS", "DataLoss"),
    ("UNAUTHENTICATED", "Unauthenticated"),
];

struct Entry {
    wire: String,
    variant: String,
    code: &'static str,
    http_status: Option<u32>,
    doc: String,
}

/// The Rust side of `enum Reason`: a plain enum (prost's would carry the
/// `REASON_UNSPECIFIED` no one sends) with its wire form, code and doc.
fn reasons() -> Result<String, Box<dyn std::error::Error>> {
    let (pool, file) = compiled("raftlock/v1/reasons.proto")?;
    let reason = pool
        .get_enum_by_name("raftlock.v1.Reason")
        .ok_or("reasons.proto declares no raftlock.v1.Reason")?;
    let grpc_code = pool
        .get_extension_by_name("raftlock.v1.grpc_code")
        .ok_or("reasons.proto declares no grpc_code option")?;
    let http_status = pool
        .get_extension_by_name("raftlock.v1.http_status")
        .ok_or("reasons.proto declares no http_status option")?;
    let mut entries = Vec::new();
    for value in reason.values().filter(|v| v.number() != 0) {
        let wire = value
            .name()
            .strip_prefix("REASON_")
            .ok_or_else(|| format!("{} lacks the REASON_ prefix", value.name()))?
            .to_owned();
        let options = value.options();
        let code_name = match &*options.get_extension(&grpc_code) {
            Value::String(s) => s.clone(),
            _ => String::new(),
        };
        let code = CODES
            .iter()
            .find(|(name, _)| *name == code_name)
            .map(|(_, variant)| *variant)
            .ok_or_else(|| format!("{}: grpc_code {code_name:?} is no gRPC code", value.name()))?;
        let status = options
            .has_extension(&http_status)
            .then(|| options.get_extension(&http_status).as_u32())
            .flatten();
        let doc = comment(&file, value.path())
            .ok_or_else(|| format!("{} has no comment saying what it means", value.name()))?;
        let variant = wire
            .split('_')
            .map(|w| w[..1].to_owned() + &w[1..].to_lowercase())
            .collect();
        entries.push(Entry {
            wire,
            variant,
            code,
            http_status: status,
            doc,
        });
    }
    let mut s = String::from(
        "// Generated by proto/build.rs from proto/raftlock/v1/reasons.proto.\n\n\
         /// Why a call was refused. The wire form is [`Reason::as_str`]\n\
         /// (`SCREAMING_SNAKE_CASE`, as `google.rpc.ErrorInfo` asks); each reason\n\
         /// always travels with the same gRPC code ([`Reason::code`]). Declared in\n\
         /// `proto/raftlock/v1/reasons.proto`.\n\
         #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]\n#[non_exhaustive]\npub enum Reason {\n",
    );
    for e in &entries {
        writeln!(s, "    /// {}", e.doc)?;
        writeln!(s, "    ///\n    /// gRPC code `{}`.", code_name(e.code))?;
        if let Some(h) = e.http_status {
            writeln!(s, "    /// HTTP status {h}.")?;
        }
        writeln!(s, "    {},", e.variant)?;
    }
    s.push_str("}\n\nimpl Reason {\n    /// Every reason, in the order they are declared.\n");
    writeln!(s, "    pub const ALL: [Reason; {}] = [", entries.len())?;
    for e in &entries {
        writeln!(s, "        Reason::{},", e.variant)?;
    }
    s.push_str("    ];\n\n    /// The wire form.\n    pub fn as_str(self) -> &'static str {\n        match self {\n");
    for e in &entries {
        writeln!(s, "            Reason::{} => {:?},", e.variant, e.wire)?;
    }
    s.push_str("        }\n    }\n\n    /// The gRPC code a status with this reason has.\n    pub fn code(self) -> tonic::Code {\n        match self {\n");
    for e in &entries {
        writeln!(
            s,
            "            Reason::{} => tonic::Code::{},",
            e.variant, e.code
        )?;
    }
    s.push_str("        }\n    }\n\n    /// The name of [`Reason::code`] in `google.rpc.Code` (`\"UNAVAILABLE\"`).\n    pub fn code_name(self) -> &'static str {\n        match self {\n");
    for e in &entries {
        writeln!(
            s,
            "            Reason::{} => {:?},",
            e.variant,
            code_name(e.code)
        )?;
    }
    s.push_str(
        "        }\n    }\n\n    /// The HTTP status of the HTTP/JSON API's refusal, where it is not\n    /// the usual one for [`Reason::code`].\n    pub fn http_status(self) -> Option<u16> {\n        match self {\n",
    );
    for e in entries.iter().filter(|e| e.http_status.is_some()) {
        writeln!(
            s,
            "            Reason::{} => Some({}),",
            e.variant,
            e.http_status.unwrap_or_default()
        )?;
    }
    s.push_str("            _ => None,\n        }\n    }\n\n    /// What the reason means, as `reasons.proto` says it.\n    pub fn doc(self) -> &'static str {\n        match self {\n");
    for e in &entries {
        writeln!(s, "            Reason::{} => {:?},", e.variant, e.doc)?;
    }
    s.push_str("        }\n    }\n}\n");
    Ok(s)
}

fn code_name(variant: &str) -> &'static str {
    CODES
        .iter()
        .find(|(_, v)| *v == variant)
        .map(|(n, _)| *n)
        .unwrap_or("UNKNOWN")
}

/// The services the lock service answers (the client API); `Cluster` is
/// the administration's and `Raft` the peers'.
const LOCK_SERVICES: [&str; 4] = ["Session", "Lock", "RateLimit", "Election"];

/// Calls answered over HTTP although their gRPC form streams requests:
/// a keep-alive is one renewal per HTTP request.
const HTTP_UNARY: [&str; 1] = ["Session/KeepAlive"];

/// Calls of other services that HTTP answers, and whether `GET` works too.
const HTTP_EXTRA: [(&str, bool); 1] = [("Cluster/Status", true)];

/// `ForceRelease` → `force-release`; `Create` → `create`.
fn kebab(name: &str) -> String {
    let mut s = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            s.push('-');
        }
        s.push(c.to_ascii_lowercase());
    }
    s
}

/// `ForceRelease` → `force_release`.
fn snake(name: &str) -> String {
    kebab(name).replace('-', "_")
}

/// A method's name as tonic generates it: `Return` → `r#return`.
fn method_ident(name: &str) -> String {
    let s = snake(name);
    if [
        "return", "type", "move", "match", "loop", "use", "ref", "mod", "impl", "fn",
    ]
    .contains(&s.as_str())
    {
        format!("r#{s}")
    } else {
        s
    }
}

/// The table of HTTP routes and the lists of plain calls, both from the
/// services of `raftlock.proto`: a call added there is routed by gRPC and
/// HTTP with no other table to edit.
fn calls() -> Result<String, Box<dyn std::error::Error>> {
    let (_, file) = compiled("raftlock/v1/raftlock.proto")?;
    let mut routes = String::new();
    let mut grpc = String::new();
    let mut http = Vec::new();
    for service in file.services() {
        let lock_service = LOCK_SERVICES.contains(&service.name());
        let mut unary = String::new();
        for method in service.methods() {
            let id = format!("{}/{}", service.name(), method.name());
            let extra = HTTP_EXTRA.iter().find(|(m, _)| *m == id);
            let forced_unary = HTTP_UNARY.contains(&id.as_str());
            let plain = !method.is_client_streaming() && !method.is_server_streaming();
            let request = method.input().name().to_owned();
            let response = method.output().name().to_owned();
            if lock_service && plain {
                writeln!(
                    unary,
                    "            {}($crate::v1::{request}) -> $crate::v1::{response};",
                    method_ident(method.name())
                )?;
            }
            if lock_service && (plain || forced_unary) {
                http.push(request.clone());
            }
            let routed = (lock_service && (!method.is_client_streaming() || forced_unary))
                || extra.is_some();
            if !routed {
                continue;
            }
            let doc = comment(&file, method.path())
                .ok_or_else(|| format!("{id} has no comment saying what it does"))?;
            let streams = method.is_server_streaming() && !forced_unary;
            let summary = doc
                .split_once(". ")
                .map_or(doc.as_str(), |(first, _)| first)
                .trim_end_matches('.')
                .to_owned()
                + ".";
            let path = if forced_unary {
                format!(
                    "/v1/{}/{}",
                    service.name().to_lowercase(),
                    method.name().to_lowercase()
                )
            } else {
                format!(
                    "/v1/{}/{}",
                    service.name().to_lowercase(),
                    kebab(method.name())
                )
            };
            writeln!(
                routes,
                "    Route {{ path: {path:?}, grpc: {:?}, request: {request:?}, response: {response:?}, \
                 streams: {streams}, get: {}, summary: {summary:?}, description: {doc:?} }},",
                format!("{}/{}", service.full_name(), method.name()),
                extra.is_some_and(|(_, get)| *get),
            )?;
        }
        if lock_service {
            writeln!(
                grpc,
                "/// Calls `$callback!` with `$prefix` and then each plain (unary) call of the\n\
                 /// `{0}` service, as `method(Request) -> Response;`.\n\
                 #[macro_export]\nmacro_rules! {1}_calls {{\n    ($callback:ident! {{ $($prefix:tt)* }}) => {{\n        \
                 $callback! {{\n            $($prefix)*\n{unary}        }}\n    }};\n}}\n",
                service.name(),
                snake(service.name()),
            )?;
        }
    }
    let mut s = String::from(
        "// Generated by proto/build.rs from the services of proto/raftlock/v1/raftlock.proto.\n\n\
         /// Every call of the HTTP API: each plain call of the lock services\n\
         /// (`Session`, `Lock`, `RateLimit`, `Election`) and each that streams\n\
         /// only its answers, at `/v1/<service>/<call>`, and the cluster's status.\n\
         pub const ROUTES: &[Route] = &[\n",
    );
    s.push_str(&routes);
    s.push_str("];\n\n");
    s.push_str(&grpc);
    writeln!(
        s,
        "/// Calls `$callback!` with the request message of every plain call HTTP\n\
         /// answers through the lock service (`Route::request`).\n\
         #[macro_export]\nmacro_rules! http_calls {{\n    ($callback:ident) => {{\n        $callback!({})\n    }};\n}}",
        http.join(", ")
    )?;
    Ok(s)
}
