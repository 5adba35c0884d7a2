//! Compiles the API with `protox` (a protobuf compiler in Rust), so building
//! raftlock needs no system `protoc`.
use std::{env, fs, path::PathBuf};

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
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
