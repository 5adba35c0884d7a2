//! Garbage and truncated frames on the client and peer ports leave every node up.

use super::fixtures::*;
use super::h2::*;

#[tokio::test(flavor = "multi_thread")]
async fn garbage_and_truncated_frames_on_both_ports_leave_every_node_up() {
    let cluster = Cluster::start(3).await;
    let b = baseline(&cluster).await;
    let addrs = |n: &raftlock_tests::Node| (n.client_addr.clone(), n.peer_addr.clone());
    let leader = addrs(&cluster.nodes()[(b.leader - 1) as usize]);
    let follower = addrs(cluster.nodes().iter().find(|n| n.id != b.leader).unwrap());
    let grpc_path = |peer: bool| {
        if peer {
            "/raftlock.v1.Raft/AppendEntries"
        } else {
            "/raftlock.v1.Lock/Acquire"
        }
    };
    let within = Duration::from_secs(5);
    // Leader and a follower, client port and peer port.
    for (role, (client, peer)) in [("leader", &leader), ("follower", &follower)] {
        for (port, addr, is_peer) in [("client", client, false), ("peer", peer, true)] {
            let place = format!("{port} port ({role}), raw TCP");

            let ex = exchange(addr, &garbage(1, 4096), false, within, |_| false).await;
            println!(
                "OBSERVED | 4 KiB of random bytes | {place} | {} |",
                ex.summary()
            );
            assert!(ex.closed, "{place}: garbage left the connection open");

            let ex = exchange(
                addr,
                b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                false,
                within,
                |_| false,
            )
            .await;
            println!("OBSERVED | HTTP/1.1 GET / | {place} | {} |", ex.summary());
            if is_peer {
                assert!(ex.closed, "{place}: HTTP/1 left the connection open");
            } else {
                // The client port speaks HTTP/1.1 for the JSON API: an
                // unknown path is a 404 with a JSON reason, and the
                // connection may stay open for the next request.
                let answer = String::from_utf8_lossy(&ex.raw);
                assert!(
                    answer.starts_with("HTTP/1.1 404") && answer.contains("UNIMPLEMENTED"),
                    "{place}: HTTP/1 GET / was not answered 404: {answer:?}"
                );
            }

            let mut bytes = PREFACE.to_vec();
            bytes.extend(garbage(2, 1024));
            let ex = exchange(addr, &bytes, false, within, |_| false).await;
            println!(
                "OBSERVED | HTTP/2 preface, then 1 KiB of random bytes | {place} | {} |",
                ex.summary()
            );
            assert!(
                ex.closed && ex.goaway(),
                "{place}: garbage frames were not refused with GOAWAY and a close"
            );

            let ex = exchange(addr, &PREFACE[..10], true, within, |_| false).await;
            println!(
                "OBSERVED | truncated HTTP/2 preface (10 of 24 bytes), then close | {place} | {} |",
                ex.summary()
            );
            assert!(ex.closed, "{place}: a closed half-preface left open");

            // 1 GiB claimed, 10 bytes sent, then the client closes.
            let mut bytes = h2_grpc_call(grpc_path(is_peer), addr);
            let mut data = vec![0, 0x40, 0, 0, 0];
            data.extend_from_slice(b"0123456789");
            bytes.extend(h2_frame(0x0, 0, 1, &data));
            let ex = exchange(addr, &bytes, false, within, Exchange::answered_stream_1).await;
            println!(
                "OBSERVED | gRPC call {} whose message claims 1 GiB, 10 bytes sent, then close | {place} | {} |",
                grpc_path(is_peer),
                ex.summary()
            );
            assert!(
                ex.answered_stream_1() || ex.closed,
                "{place}: the 1 GiB claim was neither answered nor closed"
            );
            // The same call's body through a real client, to read the status.
            let ch = connect(addr).await;
            let claimed = grpc_message(0, 1 << 30, "0123456789");
            let limit = if is_peer { 64 << 20 } else { 65536 };
            let r = if is_peer {
                RaftClient::new(raw(&ch, claimed))
                    .append_entries(RaftPayload::default())
                    .await
                    .map(drop)
            } else {
                LockClient::new(raw(&ch, claimed))
                    .acquire(AcquireRequest::default())
                    .await
                    .map(drop)
            };
            refused(
                "gRPC message claiming 1 GiB, 10 bytes sent, end of stream",
                &format!("{port} port ({role}), {}", grpc_path(is_peer)),
                r,
                Code::OutOfRange,
                &format!("found 1073741824 bytes, the limit is: {limit} bytes"),
            );
        }
    }

    // Connections that stop halfway through the preface and stay open do not
    // stop anyone else from being served.
    let mut hanging = Vec::new();
    for addr in [&leader.0, &leader.1] {
        for _ in 0..50 {
            let mut s = TcpStream::connect(addr.as_str()).await.unwrap();
            s.write_all(&PREFACE[..10]).await.unwrap();
            hanging.push(s);
        }
    }
    assert_intact(&cluster, &b, "100 half-preface connections held open").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut still_open = 0;
    for s in &mut hanging {
        if is_open(s).await {
            still_open += 1;
        }
    }
    println!(
        "OBSERVED | 50 connections per port that stop after 10 bytes of preface and stay open | client and peer port (leader), raw TCP | {still_open} of 100 still open after 1 s; other clients served meanwhile |"
    );
    drop(hanging);
    assert_intact(&cluster, &b, "frames on the client and peer ports").await;

    // Well-formed HTTP/2 and gRPC framing, bad messages.
    let client_ch = connect(&leader.0).await;
    let peer_ch = connect(&leader.1).await;
    let mut raft = RaftClient::new(peer_ch.clone());
    let cases: [(&str, Vec<u8>); 4] = [
        ("4 KiB of random bytes", garbage(3, 4096)),
        ("empty", vec![]),
        ("JSON {}", b"{}".to_vec()),
        ("JSON of the wrong shape", br#"{"vote":[1,2,3]}"#.to_vec()),
    ];
    for (what, data) in &cases {
        for rpc in ["Vote", "AppendEntries", "InstallSnapshot"] {
            let req = RaftPayload { data: data.clone() };
            let r = match rpc {
                "Vote" => raft.vote(req).await,
                "AppendEntries" => raft.append_entries(req).await,
                _ => raft.install_snapshot(req).await,
            };
            refused(
                &format!("RaftPayload.data = {what}"),
                &format!("peer port, Raft.{rpc}"),
                r,
                Code::InvalidArgument,
                "undecodable raft message",
            );
        }
    }
    assert_intact(&cluster, &b, "undecodable Raft messages").await;
    // Bytes that are not a protobuf message.
    let not_proto = grpc_message(0, 5, "\u{a}\u{7f}abc"); // field 1 claims 127 bytes, has 3
    refused(
        "protobuf whose field 1 claims 127 bytes and has 3",
        "peer port, Raft.AppendEntries",
        RaftClient::new(raw(&peer_ch, not_proto.clone()))
            .append_entries(RaftPayload::default())
            .await,
        Code::Internal,
        "failed to decode Protobuf message",
    );
    refused(
        "protobuf whose field 1 (uint64) is length-delimited",
        "client port, Lock.Acquire",
        LockClient::new(raw(&client_ch, not_proto))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "failed to decode Protobuf message",
    );
    refused(
        "gRPC message claiming 20 bytes, 10 sent, end of stream",
        "client port, Lock.Acquire",
        LockClient::new(raw(&client_ch, grpc_message(0, 20, "0123456789")))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "",
    );
    refused(
        "gRPC message claiming 20 bytes, 10 sent, end of stream",
        "peer port, Raft.AppendEntries",
        RaftClient::new(raw(&peer_ch, grpc_message(0, 20, "0123456789")))
            .append_entries(RaftPayload::default())
            .await,
        Code::Internal,
        "",
    );
    refused(
        "gRPC compressed flag set without grpc-encoding",
        "client port, Lock.Acquire",
        LockClient::new(raw(&client_ch, grpc_message(1, 2, "\u{8}\u{1}")))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "compress",
    );
    refused(
        "gRPC flag byte 7",
        "client port, Lock.Acquire",
        LockClient::new(raw(&client_ch, grpc_message(7, 2, "\u{8}\u{1}")))
            .acquire(AcquireRequest::default())
            .await,
        Code::Internal,
        "invalid compression flag: 7",
    );
    refused(
        "Raft.AppendEntries sent to the client port",
        "client port, Raft.AppendEntries",
        RaftClient::new(client_ch.clone())
            .append_entries(RaftPayload { data: vec![] })
            .await,
        Code::Unimplemented,
        "",
    );
    refused(
        "Lock.Acquire sent to the peer port",
        "peer port, Lock.Acquire",
        LockClient::new(peer_ch.clone())
            .acquire(AcquireRequest::default())
            .await,
        Code::Unimplemented,
        "",
    );
    assert_intact(&cluster, &b, "malformed gRPC messages").await;
}
