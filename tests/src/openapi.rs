//! `docs/openapi.json`, generated from what the server serves: the HTTP
//! API's route table (`raftlock_proto::http::ROUTES`) and the messages of
//! the `.proto`, in the proto3 JSON mapping the server speaks (names in
//! lowerCamelCase, 64-bit integers as decimal strings, bytes as base64,
//! enums by name). A test compares the committed document with this one, so
//! the document cannot drift from the API.

use prost::Message;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

const PACKAGE: &str = ".raftlock.v1.";

/// What the server accepts in a request field beyond the field's type: the
/// bounds of `raftlock_proto::limits` and the rules of the lock service,
/// written where a client generator or a fuzzer can read them. Rules that
/// tie two fields together (an exclusive hold takes one permit, say) cannot
/// be written in JSON Schema; field comments state them.
#[derive(Clone, Copy)]
enum Rule {
    /// An integer within `min..=max`.
    Range(u64, u64),
    /// 0 (unset), or an integer within `min..=max`.
    ZeroOr(u64, u64),
    /// A lock (or election, or rate-limit) name.
    LockName,
    /// A prefix of lock names: empty, or what a name may be.
    LockPrefix,
    /// Free text of at most this many bytes of UTF-8.
    Text(usize),
    /// Bytes, at most this many.
    Bytes(usize),
    /// A 16-byte id (a UUID); `optional` lets it be empty.
    Id { optional: bool },
    /// A list of at most this many items.
    Items(usize),
    /// Distinct lock names, `MIN_SET..=MAX_LOCKS_PER_SET` of them.
    NameSet,
}

/// The fewest names an AcquireAll takes.
const MIN_SET: usize = 2;

/// The rule of one field of a request message, if it has one.
fn rule(message: &str, field: &str) -> Option<Rule> {
    use raftlock_proto::limits as l;
    if !message.ends_with("Request") && message != "LimitSpec" {
        return None;
    }
    Some(match (message, field) {
        ("ListRequest", "prefix") => return None,
        ("WatchRequest", "prefix") => Rule::LockPrefix,
        (_, "name") => Rule::LockName,
        ("AcquireAllRequest", "names") => Rule::NameSet,
        ("ListSessionsRequest", _) => return None,
        (_, "sessionId") => Rule::Range(1, u64::MAX),
        (_, "requestId") => Rule::Id { optional: false },
        (_, "creationKey") => Rule::Id { optional: true },
        ("CreateSessionRequest", "ttlMs") => Rule::Range(l::MIN_TTL_MS, l::MAX_TTL_MS),
        ("CreateSessionRequest", "clientName" | "host") => Rule::Text(l::MAX_CLIENT_NAME_LEN),
        (_, "metadata" | "value") => Rule::Bytes(l::MAX_METADATA_LEN),
        (_, "waitTimeoutMs") => Rule::Range(0, l::MAX_WAIT_MS),
        ("AcquireRequest", "maxHoldMs") => Rule::ZeroOr(l::MIN_HOLD_MS, l::MAX_HOLD_MS),
        ("AcquireRequest", "lockDelayMs") => Rule::Range(0, l::MAX_LOCK_DELAY_MS),
        (_, "inFlight") => Rule::Items(l::MAX_IN_FLIGHT_LISTED),
        // 0: one token.
        ("TakeRequest", "n") => Rule::Range(0, l::MAX_BURST),
        ("TakeRequest", "leaseMs") => Rule::Range(0, l::MAX_TOKEN_LEASE_MS),
        ("LimitSpec", "rate") => Rule::Range(1, l::MAX_RATE),
        // 0: a second.
        ("LimitSpec", "perMs") => Rule::Range(0, l::MAX_RATE_PERIOD_MS),
        // 0: one token.
        ("LimitSpec", "burst") => Rule::Range(0, l::MAX_BURST),
        _ => return None,
    })
}

/// Whether a request must set the field: its unset value is refused.
fn required(message: &str, field: &str) -> bool {
    match rule(message, field) {
        Some(Rule::LockName | Rule::NameSet | Rule::Id { optional: false }) => true,
        Some(Rule::Range(lo, _)) => lo > 0,
        _ => (message, field) == ("DefineLimitRequest", "limit"),
    }
}

/// A regular expression (no anchors) for the decimal numbers within
/// `lo..=hi`, written without leading zeros.
fn range_regex(lo: u64, hi: u64) -> String {
    fn same_length(a: &[u8], b: &[u8]) -> String {
        let Some((&a0, a_rest)) = a.split_first() else {
            return String::new();
        };
        let (b0, b_rest) = (b[0], &b[1..]);
        let any = |n: usize| match n {
            0 => String::new(),
            1 => "[0-9]".to_owned(),
            n => format!("[0-9]{{{n}}}"),
        };
        let digits = |x: u8, y: u8| {
            if x == y {
                (x as char).to_string()
            } else {
                format!("[{}-{}]", x as char, y as char)
            }
        };
        if a0 == b0 {
            return format!("{}{}", a0 as char, same_length(a_rest, b_rest));
        }
        if a_rest.iter().all(|&c| c == b'0') && b_rest.iter().all(|&c| c == b'9') {
            return format!("{}{}", digits(a0, b0), any(a_rest.len()));
        }
        let nines = vec![b'9'; a_rest.len()];
        let zeros = vec![b'0'; a_rest.len()];
        let mut parts = vec![format!("{}{}", a0 as char, same_length(a_rest, &nines))];
        if b0 - a0 >= 2 {
            parts.push(format!("{}{}", digits(a0 + 1, b0 - 1), any(a_rest.len())));
        }
        parts.push(format!("{}{}", b0 as char, same_length(&zeros, b_rest)));
        format!("(?:{})", parts.join("|"))
    }
    let mut parts = Vec::new();
    let (mut from, mut width) = (lo, lo.to_string().len() as u32);
    loop {
        let top = 10u64.checked_pow(width).map_or(u64::MAX, |p| p - 1).min(hi);
        parts.push(same_length(
            from.to_string().as_bytes(),
            top.to_string().as_bytes(),
        ));
        if top == hi {
            break;
        }
        from = top + 1;
        width += 1;
    }
    if parts.len() == 1 {
        parts.pop().unwrap_or_default()
    } else {
        format!("(?:{})", parts.join("|"))
    }
}

/// An integer field within `lo..=hi` (and 0 if `zero`). proto3 JSON writes
/// a 64-bit one as a decimal string and a 32-bit one as a number, and reads
/// either as either.
fn integer(lo: u64, hi: u64, zero: bool, signed: bool, bits: u32) -> Value {
    let mut pattern = range_regex(lo, hi);
    if zero && lo > 0 {
        pattern = format!("0|{pattern}");
    }
    let pattern = if signed {
        "^-?[0-9]+$".to_owned()
    } else {
        // Leading zeros parse, as they do in Rust and Go.
        format!("^0*(?:{pattern})$")
    };
    // Only formats OpenAPI defines: a validator fails the values of any
    // other. An unsigned 64-bit value may pass int64's range, so it has none.
    let number = |extra: Value| {
        let mut n = json!({"type": "integer"});
        if bits == 32 {
            n["format"] = json!(if signed { "int32" } else { "int64" });
        }
        if let (Value::Object(n), Value::Object(extra)) = (&mut n, extra) {
            n.extend(extra);
        }
        n
    };
    let mut branches = vec![json!({"type": "string", "pattern": pattern})];
    if signed {
        branches.push(number(json!({})));
    } else {
        if zero && lo > 0 {
            branches.push(number(json!({"enum": [0]})));
        }
        branches.push(number(json!({"minimum": lo, "maximum": hi})));
    }
    json!({ "anyOf": branches })
}

/// Characters a name may not hold: Unicode's control characters.
const NO_CONTROLS: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$";

/// The API's messages and enums by short name, with their comments.
struct Api {
    messages: BTreeMap<String, (DescriptorProto, Vec<i32>)>,
    enums: BTreeMap<String, (EnumDescriptorProto, Vec<i32>)>,
    comments: BTreeMap<Vec<i32>, String>,
}

impl Api {
    fn load() -> Api {
        let set = FileDescriptorSet::decode(raftlock_proto::FILE_DESCRIPTOR_SET)
            .expect("the crate's own descriptor set decodes");
        let file = set
            .file
            .into_iter()
            .find(|f| f.package() == "raftlock.v1")
            .expect("raftlock.v1 is in the descriptor set");
        let mut comments = BTreeMap::new();
        for loc in file
            .source_code_info
            .as_ref()
            .map(|i| i.location.as_slice())
            .unwrap_or_default()
        {
            if let Some(c) = &loc.leading_comments {
                let text = c
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
                comments.insert(loc.path.clone(), text);
            }
        }
        let mut messages = BTreeMap::new();
        for (i, m) in file.message_type.iter().enumerate() {
            messages.insert(m.name().to_owned(), (m.clone(), vec![4, i as i32]));
        }
        let mut enums = BTreeMap::new();
        for (i, e) in file.enum_type.iter().enumerate() {
            enums.insert(e.name().to_owned(), (e.clone(), vec![5, i as i32]));
        }
        Api {
            messages,
            enums,
            comments,
        }
    }

    fn describe(&self, path: &[i32], schema: &mut Map<String, Value>) {
        if let Some(c) = self.comments.get(path) {
            schema.insert("description".into(), Value::String(c.clone()));
        }
    }

    /// The schema of one field's value (not its repetition).
    fn field_type(
        &self,
        f: &prost_types::FieldDescriptorProto,
        rule: Option<Rule>,
        refs: &mut BTreeSet<String>,
    ) -> Value {
        let (lo, hi, zero) = match rule {
            Some(Rule::Range(lo, hi)) => (lo, hi, false),
            Some(Rule::ZeroOr(lo, hi)) => (lo, hi, true),
            _ => (0, u64::MAX, false),
        };
        let reference = |refs: &mut BTreeSet<String>| {
            let name = f.type_name().trim_start_matches(PACKAGE).to_owned();
            refs.insert(name.clone());
            json!({ "$ref": format!("#/components/schemas/{name}") })
        };
        match f.r#type() {
            Type::Uint64 | Type::Fixed64 => integer(lo, hi, zero, false, 64),
            Type::Int64 | Type::Sint64 | Type::Sfixed64 => integer(0, 0, false, true, 64),
            Type::Uint32 | Type::Fixed32 => {
                integer(lo, hi.min(u64::from(u32::MAX)), zero, false, 32)
            }
            Type::Int32 | Type::Sint32 | Type::Sfixed32 => integer(0, 0, false, true, 32),
            Type::Bool => json!({"type": "boolean"}),
            // JSON Schema counts characters, the server bytes of UTF-8: the
            // field's comment says so.
            Type::String => match rule {
                Some(Rule::LockName | Rule::NameSet) => json!({
                    "type": "string", "minLength": 1,
                    "maxLength": raftlock_proto::limits::MAX_NAME_LEN, "pattern": NO_CONTROLS,
                }),
                Some(Rule::LockPrefix) => json!({
                    "type": "string",
                    "maxLength": raftlock_proto::limits::MAX_NAME_LEN, "pattern": NO_CONTROLS,
                }),
                Some(Rule::Text(bytes)) => json!({"type": "string", "maxLength": bytes}),
                _ => json!({"type": "string"}),
            },
            Type::Bytes => match rule {
                // Standard base64, padded or not, or its URL-safe alphabet
                // (not both in one value); the last character's unused bits
                // are 0.
                Some(Rule::Id { optional }) => json!({
                    "type": "string", "format": "byte",
                    "pattern": if optional {
                        "^(?:[A-Za-z0-9+/]{21}[AQgw](?:==)?|[A-Za-z0-9_-]{21}[AQgw](?:==)?)?$"
                    } else {
                        "^(?:[A-Za-z0-9+/]{21}[AQgw](?:==)?|[A-Za-z0-9_-]{21}[AQgw](?:==)?)$"
                    },
                }),
                // Base64 of at most `n` bytes, in either alphabet, padded
                // or not: `format: byte` alone let schemathesis send text
                // the server rightly refuses as not base64, and a length
                // alone, base64 that decodes to a few bytes too many.
                Some(Rule::Bytes(n)) => json!({
                    // The unpadded length: any text this long, padded or
                    // not, holds no more than `n` bytes.
                    "type": "string", "format": "byte", "maxLength": (4 * n).div_ceil(3),
                    "pattern": base64_pattern(n),
                }),
                _ => json!({"type": "string", "format": "byte"}),
            },
            Type::Double | Type::Float => json!({"type": "number"}),
            Type::Enum | Type::Message | Type::Group => reference(refs),
        }
    }

    fn message_schema(&self, name: &str, refs: &mut BTreeSet<String>) -> Value {
        let (m, path) = &self.messages[name];
        let mut properties = Map::new();
        let mut must = Vec::new();
        for (i, f) in m.field.iter().enumerate() {
            let rule = rule(name, f.json_name());
            let mut schema = match self.field_type(f, rule, refs) {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            if f.label() == Label::Repeated {
                let item = Value::Object(std::mem::take(&mut schema));
                schema.insert("type".into(), "array".into());
                schema.insert("items".into(), item);
                if let Some(Rule::Items(n)) = rule {
                    schema.insert("maxItems".into(), n.into());
                }
                if let Some(Rule::NameSet) = rule {
                    schema.insert("minItems".into(), MIN_SET.into());
                    let most = raftlock_proto::limits::MAX_LOCKS_PER_SET;
                    schema.insert("maxItems".into(), most.into());
                    schema.insert("uniqueItems".into(), true.into());
                }
            }
            let mut field_path = path.clone();
            field_path.extend([2, i as i32]);
            if schema.contains_key("$ref") {
                // A sibling of $ref is ignored by OpenAPI 3.0: wrap it.
                let r = Value::Object(std::mem::take(&mut schema));
                schema.insert("allOf".into(), Value::Array(vec![r]));
            }
            self.describe(&field_path, &mut schema);
            if required(name, f.json_name()) {
                must.push(Value::String(f.json_name().to_owned()));
            } else if f.proto3_optional()
                || (f.r#type() == Type::Message && f.label() != Label::Repeated)
            {
                // Null reads as unset where a field can be unset; the
                // server refuses it for the others, as pbjson decodes.
                schema.insert("nullable".into(), true.into());
            }
            properties.insert(f.json_name().to_owned(), Value::Object(schema));
        }
        let mut schema = Map::new();
        schema.insert("type".into(), "object".into());
        if !must.is_empty() {
            schema.insert("required".into(), Value::Array(must));
        }
        schema.insert("additionalProperties".into(), false.into());
        schema.insert("properties".into(), Value::Object(properties));
        self.describe(path, &mut schema);
        Value::Object(schema)
    }

    fn enum_schema(&self, name: &str) -> Value {
        let (e, path) = &self.enums[name];
        let values: Vec<Value> = e
            .value
            .iter()
            .map(|v| Value::String(v.name().into()))
            .collect();
        let mut schema = Map::new();
        schema.insert("type".into(), "string".into());
        schema.insert("enum".into(), Value::Array(values));
        self.describe(path, &mut schema);
        Value::Object(schema)
    }
}

/// OpenAPI links, so that a client (and schemathesis's stateful phase) can
/// see where the identifiers an operation needs come from: a new session's
/// id goes to every operation that takes one, and a grant's token to the
/// calls that end it.
fn link_operations(api: &Api, paths: &mut Map<String, Value>) {
    let route = |grpc: &str| {
        raftlock_proto::http::ROUTES
            .iter()
            .find(|r| r.grpc.ends_with(grpc))
    };
    let takes = |r: &raftlock_proto::http::Route, field: &str| {
        api.messages
            .get(r.request)
            .is_some_and(|(m, _)| m.field.iter().any(|f| f.json_name() == field))
    };
    let op_id = |r: &raftlock_proto::http::Route| {
        r.grpc.trim_start_matches("raftlock.v1.").replace('/', ".")
    };
    let mut links: Vec<(&str, String, Value)> = Vec::new();
    for target in raftlock_proto::http::ROUTES {
        if takes(target, "sessionId") && !target.grpc.ends_with("Session/Create") {
            links.push((
                "Session/Create",
                op_id(target),
                json!({
                    "operationId": op_id(target),
                    "requestBody": { "sessionId": "$response.body#/sessionId" },
                }),
            ));
        }
    }
    for (source, target, grant) in [
        ("Lock/Acquire", "Lock/Release", "grant"),
        ("Election/Campaign", "Election/Resign", "leader"),
        ("Election/Campaign", "Election/Proclaim", "leader"),
    ] {
        if let Some(target) = route(target) {
            links.push((
                source,
                op_id(target),
                json!({
                    "operationId": op_id(target),
                    "requestBody": {
                        "sessionId": "$request.body#/sessionId",
                        "name": "$request.body#/name",
                        "token": format!("$response.body#/{grant}/token"),
                    },
                }),
            ));
        }
    }
    for (source, name, link) in links {
        let Some(r) = route(source) else { continue };
        let answer = paths
            .get_mut(r.path)
            .and_then(|item| item.get_mut("post"))
            .and_then(|op| op.pointer_mut("/responses/200"))
            .and_then(Value::as_object_mut);
        if let Some(answer) = answer {
            let all = answer.entry("links").or_insert_with(|| json!({}));
            if let Some(all) = all.as_object_mut() {
                all.insert(name, link);
            }
        }
    }
}

/// The OpenAPI 3.0 document of the HTTP API.
pub fn document() -> Value {
    let api = Api::load();
    let mut refs = BTreeSet::new();
    let mut paths = Map::new();
    let schema_ref = |name: &str| json!({ "$ref": format!("#/components/schemas/{name}") });
    for r in raftlock_proto::http::ROUTES {
        // An empty body is the message with every field unset.
        let body_required = api
            .messages
            .get(r.request)
            .is_some_and(|(m, _)| m.field.iter().any(|f| required(r.request, f.json_name())));
        refs.insert(r.request.to_owned());
        refs.insert(r.response.to_owned());
        let answer = if r.streams {
            json!({
                "description": format!("A stream of {}: one JSON object per line, or one server-sent event each with `accept: text/event-stream`; the last item may be {{\"error\": Error}}. The schema is that of one line.", r.response),
                "content": {
                    "application/x-ndjson": { "schema": {
                        "anyOf": [schema_ref(r.response), schema_ref("StreamError")],
                    } },
                    "text/event-stream": { "schema": { "type": "string" } },
                },
            })
        } else {
            json!({
                "description": format!("The {}.", r.response),
                "content": { "application/json": { "schema": schema_ref(r.response) } },
            })
        };
        let operation = |method: &str| {
            json!({
                "operationId": format!("{}{}", r.grpc.trim_start_matches("raftlock.v1.").replace('/', "."), if method == "get" { ".get" } else { "" }),
                "summary": r.summary,
                "description": format!("{}\n\ngRPC: {}", r.description, r.grpc),
                "requestBody": {
                    "required": body_required,
                    "content": { "application/json": { "schema": schema_ref(r.request) } },
                },
                "responses": {
                    "200": answer,
                    "default": {
                        "description": "A refusal: 400, 401, 403, 404, 409, 413, 429, 500, 503 (with the leader's address in `raftlock-leader` when this node does not lead), 504.",
                        "content": { "application/json": { "schema": schema_ref("Error") } },
                    },
                },
            })
        };
        let mut item = Map::new();
        if r.streams {
            item.insert(
                "parameters".into(),
                json!([{
                    "name": "timeoutMs",
                    "in": "query",
                    "required": false,
                    "description": "End the stream after this many ms (it otherwise lasts until the caller goes away or this node stops leading): for a caller that cannot end a request mid-body. A watch resumes with `afterIndex` set to the last index it saw.",
                    "schema": {
                        "type": "integer", "format": "int64",
                        "minimum": 1, "maximum": raftlock_proto::limits::MAX_WAIT_MS,
                    },
                }]),
            );
        }
        item.insert("post".into(), operation("post"));
        if r.get {
            let mut get = operation("get");
            if let Some(o) = get.as_object_mut() {
                o.remove("requestBody");
            }
            item.insert("get".into(), get);
        }
        paths.insert(r.path.into(), Value::Object(item));
    }
    link_operations(&api, &mut paths);
    // Everything the routes' messages reach.
    let mut schemas = Map::new();
    let mut pending: Vec<String> = refs.iter().cloned().collect();
    let mut seen = BTreeSet::new();
    while let Some(name) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let mut found = BTreeSet::new();
        let schema = if api.enums.contains_key(&name) {
            api.enum_schema(&name)
        } else {
            api.message_schema(&name, &mut found)
        };
        schemas.insert(name, schema);
        pending.extend(found.into_iter().filter(|n| !seen.contains(n)));
    }
    schemas.insert(
        "Error".into(),
        json!({
            "type": "object",
            "description": "A refusal. Clients match `reason`, never `message`.",
            "required": ["code", "reason", "message"],
            "properties": {
                "code": { "type": "string", "description": "The gRPC code's name, e.g. FAILED_PRECONDITION." },
                "reason": { "type": "string", "description": "The machine-readable reason, e.g. STALE_TOKEN (empty for a call that does not exist).", "enum": raftlock_proto::reason::Reason::ALL.iter().map(|r| r.as_str()).chain([""]).collect::<Vec<_>>() },
                "message": { "type": "string", "description": "What was wrong, for people." },
                "leader": { "type": "string", "description": "The leader's address (host:port of the same API) when this node does not lead." },
            },
        }),
    );
    schemas.insert(
        "StreamError".into(),
        json!({
            "type": "object",
            "description": "The last item of a stream that ended with a refusal.",
            "required": ["error"],
            "additionalProperties": false,
            "properties": { "error": schema_ref("Error") },
        }),
    );
    let schemas: Map<String, Value> = schemas
        .into_iter()
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect();
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "raftlock HTTP/JSON API",
            "version": "v1",
            "description": "The gRPC API of raftlock, one call to one path, on the same port as gRPC. Bodies are the proto3 JSON mapping of the gRPC messages: lowerCamelCase names, 64-bit integers as decimal strings, bytes as base64, enums by name; unknown fields are refused. A follower answers 503 with reason NOT_LEADER and the leader's address in the `raftlock-leader` header: retry there.",
        },
        "servers": [{ "url": "http://127.0.0.1:7000" }],
        "security": [{ "bearer": [] }, {}],
        "paths": paths,
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": schemas,
        },
    })
}

/// A pattern for base64 of at most `n` bytes, in the standard or the
/// URL-safe alphabet (one per value: the server reads a value in one or the
/// other), padding optional: whole groups of three bytes, then at most one
/// group of one or two, whose last character leaves no stray bits.
fn base64_pattern(n: usize) -> String {
    let one_alphabet = |c: &str| {
        let g = format!("[A-Za-z0-9{c}]{{4}}");
        let one = format!("[A-Za-z0-9{c}][AQgw](?:==)?");
        let two = format!("[A-Za-z0-9{c}]{{2}}[AEIMQUYcgkosw048]=?");
        let any_tail = format!("(?:{g}|{one}|{two})?");
        let full = n / 3;
        match (n % 3, full) {
            (0, 0) => String::new(),
            (0, _) => format!("(?:{g}){{0,{}}}{any_tail}", full - 1),
            (1, 0) => format!("(?:{one})?"),
            (1, _) => format!(
                "(?:(?:{g}){{0,{}}}{any_tail}|(?:{g}){{{full}}}(?:{one})?)",
                full - 1
            ),
            _ => format!("(?:{g}){{0,{full}}}(?:{one}|{two})?"),
        }
    };
    format!("^(?:{}|{})$", one_alphabet("+/"), one_alphabet("_-"))
}

#[cfg(test)]
mod base64_tests {
    use super::base64_pattern;
    use base64::Engine;

    /// Every encoding of every length up to a few groups past `n` matches
    /// exactly when it decodes to at most `n` bytes.
    #[test]
    fn the_pattern_admits_exactly_the_base64_of_at_most_n_bytes() {
        for n in 0..12usize {
            let re = regex::Regex::new(&base64_pattern(n)).unwrap();
            for len in 0..n + 6 {
                let bytes = vec![0xfbu8; len];
                for text in [
                    base64::engine::general_purpose::STANDARD.encode(&bytes),
                    base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes),
                    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&bytes),
                ] {
                    assert_eq!(re.is_match(&text), len <= n, "n {n}, {len} bytes: {text}");
                }
            }
            // The server reads a value in one alphabet or the other.
            if n >= 3 {
                assert!(!re.is_match("+-AA"), "n {n}: mixed alphabets");
                assert!(!re.is_match("AB"), "n {n}: stray bits");
            }
        }
    }
}
