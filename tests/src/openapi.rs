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
        refs: &mut BTreeSet<String>,
    ) -> Value {
        let reference = |refs: &mut BTreeSet<String>| {
            let name = f.type_name().trim_start_matches(PACKAGE).to_owned();
            refs.insert(name.clone());
            json!({ "$ref": format!("#/components/schemas/{name}") })
        };
        match f.r#type() {
            Type::Uint64 | Type::Fixed64 => {
                json!({"type": "string", "format": "uint64", "pattern": "^[0-9]+$"})
            }
            Type::Int64 | Type::Sint64 | Type::Sfixed64 => {
                json!({"type": "string", "format": "int64", "pattern": "^-?[0-9]+$"})
            }
            Type::Uint32 | Type::Fixed32 => {
                json!({"type": "integer", "format": "int64", "minimum": 0, "maximum": u32::MAX})
            }
            Type::Int32 | Type::Sint32 | Type::Sfixed32 => {
                json!({"type": "integer", "format": "int32"})
            }
            Type::Bool => json!({"type": "boolean"}),
            Type::String => json!({"type": "string"}),
            Type::Bytes => json!({"type": "string", "format": "byte"}),
            Type::Double | Type::Float => json!({"type": "number"}),
            Type::Enum | Type::Message | Type::Group => reference(refs),
        }
    }

    fn message_schema(&self, name: &str, refs: &mut BTreeSet<String>) -> Value {
        let (m, path) = &self.messages[name];
        let mut properties = Map::new();
        for (i, f) in m.field.iter().enumerate() {
            let mut schema = match self.field_type(f, refs) {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            if f.label() == Label::Repeated {
                let item = Value::Object(std::mem::take(&mut schema));
                schema.insert("type".into(), "array".into());
                schema.insert("items".into(), item);
            }
            let mut field_path = path.clone();
            field_path.extend([2, i as i32]);
            if schema.contains_key("$ref") {
                // A sibling of $ref is ignored by OpenAPI 3.0: wrap it.
                let r = Value::Object(std::mem::take(&mut schema));
                schema.insert("allOf".into(), Value::Array(vec![r]));
            }
            self.describe(&field_path, &mut schema);
            properties.insert(f.json_name().to_owned(), Value::Object(schema));
        }
        let mut schema = Map::new();
        schema.insert("type".into(), "object".into());
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

/// The OpenAPI 3.0 document of the HTTP API.
pub fn document() -> Value {
    let api = Api::load();
    let mut refs = BTreeSet::new();
    let mut paths = Map::new();
    let schema_ref = |name: &str| json!({ "$ref": format!("#/components/schemas/{name}") });
    for r in raftlock_proto::http::ROUTES {
        refs.insert(r.request.to_owned());
        refs.insert(r.response.to_owned());
        let answer = if r.streams {
            json!({
                "description": format!("A stream of {}: one JSON object per line, or one server-sent event each with `accept: text/event-stream`; the last item may be {{\"error\": Error}}.", r.response),
                "content": {
                    "application/x-ndjson": { "schema": schema_ref(r.response) },
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
                "description": format!("gRPC: {}", r.grpc),
                "requestBody": {
                    "required": false,
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
