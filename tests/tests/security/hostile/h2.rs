//! A minimal HTTP/2 client for sending what no HTTP/2 library will: raw
//! frames, truncated frames and garbage, and for reading back exactly what
//! the server answered.

use super::fixtures::*;

pub(super) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub(super) fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

pub(super) fn hpack_str(out: &mut Vec<u8>, s: &str) {
    assert!(s.len() < 127);
    out.push(s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

/// Preface, empty SETTINGS, then HEADERS opening stream 1 as a gRPC call of
/// `path` (HPACK without Huffman or indexing).
pub(super) fn h2_grpc_call(path: &str, authority: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    block.push(0x04); // :path, literal value
    hpack_str(&mut block, path);
    block.push(0x01); // :authority, literal value
    hpack_str(&mut block, authority);
    for (k, v) in [("content-type", "application/grpc"), ("te", "trailers")] {
        block.push(0x00);
        hpack_str(&mut block, k);
        hpack_str(&mut block, v);
    }
    let mut out = PREFACE.to_vec();
    out.extend(h2_frame(0x4, 0, 0, &[]));
    out.extend(h2_frame(0x1, 0x4, 1, &block)); // END_HEADERS
    out
}

pub(super) struct Frame {
    pub(super) kind: u8,
    pub(super) flags: u8,
    pub(super) stream: u32,
    pub(super) payload: Vec<u8>,
}

pub(super) fn parse_frames(mut bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        if bytes.len() < 9 + len {
            break;
        }
        out.push(Frame {
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff,
            payload: bytes[9..9 + len].to_vec(),
        });
        bytes = &bytes[9 + len..];
    }
    out
}

pub(super) fn h2_error(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    NAMES
        .get(code as usize)
        .map(|s| (*s).to_owned())
        .unwrap_or_else(|| format!("error {code}"))
}

pub(super) fn describe_frames(frames: &[Frame]) -> String {
    let names = [
        "DATA",
        "HEADERS",
        "PRIORITY",
        "RST_STREAM",
        "SETTINGS",
        "PUSH_PROMISE",
        "PING",
        "GOAWAY",
        "WINDOW_UPDATE",
        "CONTINUATION",
    ];
    frames
        .iter()
        .map(|f| {
            let name = names.get(f.kind as usize).copied().unwrap_or("UNKNOWN");
            match f.kind {
                7 if f.payload.len() >= 8 => {
                    let code = u32::from_be_bytes(f.payload[4..8].try_into().unwrap());
                    let debug = String::from_utf8_lossy(&f.payload[8..]);
                    if debug.is_empty() {
                        format!("GOAWAY({})", h2_error(code))
                    } else {
                        format!("GOAWAY({}, {debug:?})", h2_error(code))
                    }
                }
                3 if f.payload.len() >= 4 => format!(
                    "RST_STREAM(stream {}, {})",
                    f.stream,
                    h2_error(u32::from_be_bytes(f.payload[..4].try_into().unwrap()))
                ),
                1 if f.flags & 1 == 1 => format!("HEADERS(stream {}, END_STREAM)", f.stream),
                _ => format!("{name}(stream {})", f.stream),
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a server did with bytes sent on a raw connection.
pub(super) struct Exchange {
    pub(super) frames: Vec<Frame>,
    /// The server closed (or reset) the connection.
    pub(super) closed: bool,
    /// Bytes received that are not HTTP/2 frames (an HTTP/1 answer, say).
    pub(super) raw: Vec<u8>,
}

impl Exchange {
    pub(super) fn summary(&self) -> String {
        let mut parts = Vec::new();
        if !self.frames.is_empty() {
            parts.push(format!("frames: {}", describe_frames(&self.frames)));
        } else if !self.raw.is_empty() {
            let text = String::from_utf8_lossy(&self.raw);
            parts.push(format!(
                "bytes: {:?}",
                text.lines().next().unwrap_or_default()
            ));
        } else {
            parts.push("no bytes".to_owned());
        }
        parts.push(if self.closed {
            "server closed the connection".to_owned()
        } else {
            "connection still open when the test closed it".to_owned()
        });
        parts.join("; ")
    }

    pub(super) fn goaway(&self) -> bool {
        self.frames.iter().any(|f| f.kind == 7)
    }

    /// The server answered stream 1 (a trailers-only error or a reset).
    pub(super) fn answered_stream_1(&self) -> bool {
        self.frames
            .iter()
            .any(|f| f.stream == 1 && (f.kind == 3 || (f.kind == 1 && f.flags & 1 == 1)))
    }
}

/// Sends `bytes`, optionally half-closes, and reads until the server closes,
/// `done` says enough, or `within` passes.
pub(super) async fn exchange(
    addr: &str,
    bytes: &[u8],
    half_close: bool,
    within: Duration,
    done: impl Fn(&Exchange) -> bool,
) -> Exchange {
    let mut s = TcpStream::connect(addr).await.expect("tcp connect");
    s.set_nodelay(true).unwrap();
    let mut ex = Exchange {
        frames: Vec::new(),
        closed: false,
        raw: Vec::new(),
    };
    // The server may close before taking everything: that is an answer too.
    if s.write_all(bytes).await.is_err() {
        ex.closed = true;
        return ex;
    }
    if half_close {
        let _ = s.shutdown().await;
    }
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => break,
            Ok(Ok(0)) | Ok(Err(_)) => {
                ex.closed = true;
                break;
            }
            Ok(Ok(n)) => {
                ex.raw.extend_from_slice(&buf[..n]);
                ex.frames = parse_frames(&ex.raw);
                if done(&ex) {
                    break;
                }
            }
        }
    }
    // Bytes that are not HTTP/2 frames are kept for the summary.
    if !ex.frames.is_empty() {
        ex.raw.clear();
    }
    ex
}

/// Whether the server still keeps `s` open (reads what it sent, if anything).
pub(super) async fn is_open(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_millis(5), s.read(&mut buf)).await {
            Err(_) => return true,
            Ok(Ok(0)) | Ok(Err(_)) => return false,
            Ok(Ok(_)) => {}
        }
    }
}
