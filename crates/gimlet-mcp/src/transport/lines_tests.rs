use std::time::Duration;

use rmcp::model::{ClientNotification, RequestMetaObject, ServerResult};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use super::*;

/// rmcp's own reading of a line, for comparison.
fn rmcp_decode(
    line: &str,
) -> Result<Option<RxJsonRpcMessage<RoleServer>>, JsonRpcMessageCodecError> {
    let mut buffer = BytesMut::from(format!("{line}\n").as_bytes());
    JsonRpcMessageCodec::<RxJsonRpcMessage<RoleServer>>::default().decode(&mut buffer)
}

fn meta_of(message: &RxJsonRpcMessage<RoleServer>) -> Option<RequestMetaObject> {
    match message {
        JsonRpcMessage::Request(JsonRpcRequest {
            request: ClientRequest::CallToolRequest(call),
            ..
        }) => call.extensions.get::<RequestMetaObject>().cloned(),
        _ => None,
    }
}

#[test]
fn calls_decode_directly_and_exactly_as_rmcp_does() {
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"path":"a.txt","limit":5}}}"#,
        r#"{"params":{"name":"ls"},"method":"tools/call","id":"req-7","jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"p1","x":[1,2.5,-3]},"name":"grep","arguments":{"pattern":"fn \"q\" \u00e9"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bash","arguments":{"command":"ls"},"requestState":"s","inputResponses":{"q":{"action":"accept","content":{"answer":"yes"}}},"extra":true}}"#,
        "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"read\",\"arguments\":{}}}\r",
    ];
    for line in lines {
        let body = line.trim_start_matches('\u{feff}').trim_end_matches('\r');
        let fast = decode_call(body.as_bytes());
        assert!(fast.is_some(), "not decoded directly: {line}");
        let fast = decode(format!("{line}\n").as_bytes()).unwrap().unwrap();
        let slow = rmcp_decode(line).unwrap().unwrap();
        assert_eq!(
            serde_json::to_value(&fast).unwrap(),
            serde_json::to_value(&slow).unwrap(),
            "{line}"
        );
        assert_eq!(meta_of(&fast), meta_of(&slow), "{line}");
    }
}

#[test]
fn the_meta_goes_to_the_extensions_like_rmcp() {
    let line = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"progressToken":7},"name":"read"}}"#;
    let message = decode(format!("{line}\n").as_bytes()).unwrap().unwrap();
    let meta = meta_of(&message).unwrap();
    assert_eq!(meta.0.0.get("progressToken"), Some(&json!(7)));
    let JsonRpcMessage::Request(JsonRpcRequest {
        request: ClientRequest::CallToolRequest(call),
        ..
    }) = message
    else {
        panic!("not a call");
    };
    assert!(call.params.meta.is_none());
}

#[test]
fn anything_else_takes_rmcps_path_with_rmcps_answer() {
    let lines = [
        // Not a call.
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        // A call the direct decoder refuses: each must get whatever rmcp makes of it.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"},"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"},"error":null}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"read"}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"read"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"read"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"read"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"name":"tools/call"}}"#,
        // Notifications from outside MCP.
        r#"{"jsonrpc":"2.0","method":"$/progress","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/unknown"}"#,
        // A response to one of our requests.
        r#"{"jsonrpc":"2.0","id":"e1","result":{"action":"decline"}}"#,
    ];
    for line in lines {
        assert!(
            decode_call(line.as_bytes()).is_none(),
            "decoded directly: {line}"
        );
        let ours = decode(format!("{line}\n").as_bytes());
        let theirs = rmcp_decode(line);
        match (ours, theirs) {
            (Ok(ours), Ok(theirs)) => assert_eq!(
                serde_json::to_value(&ours).unwrap(),
                serde_json::to_value(&theirs).unwrap(),
                "{line}"
            ),
            (Err(ours), Err(theirs)) => assert_eq!(ours.to_string(), theirs.to_string()),
            (ours, theirs) => panic!("{line}: ours {ours:?}, rmcp's {theirs:?}"),
        }
    }
}

#[test]
fn blank_lines_deliver_nothing() {
    assert!(decode(b"\n").unwrap().is_none());
    assert!(decode(b"\r\n").unwrap().is_none());
    assert!(decode(b"\xEF\xBB\xBF\n").unwrap().is_none());
}

/// A transport over in-memory pipes: what the client writes, and what it reads back.
fn transport(
    max_line: usize,
) -> (
    LineTransport<tokio::io::DuplexStream, tokio::io::DuplexStream>,
    tokio::io::DuplexStream,
    tokio::io::BufReader<tokio::io::DuplexStream>,
) {
    let (client_out, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, client_in) = tokio::io::duplex(1 << 16);
    let mut transport = LineTransport::new(server_in, server_out);
    transport.max_line = max_line;
    (transport, client_out, tokio::io::BufReader::new(client_in))
}

/// The next line the client reads, as JSON; fails rather than waits when none comes.
async fn next_reply(replies: &mut tokio::io::BufReader<tokio::io::DuplexStream>) -> Value {
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(10), replies.read_line(&mut line))
        .await
        .expect("no answer came")
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

fn request_id_of(message: &RxJsonRpcMessage<RoleServer>) -> Value {
    match message {
        JsonRpcMessage::Request(request) => serde_json::to_value(&request.id).unwrap(),
        _ => Value::Null,
    }
}

#[tokio::test]
async fn the_stream_is_framed_like_rmcps() {
    let (mut transport, mut client, mut replies) = transport(200);
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"}}"#;
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"{}"}}}}"#,
        "x".repeat(300)
    );
    let input = format!(
        "{call}\r\n\n{long}\n{{\"no\":\"message\"}}\nnot json\n\u{feff}{{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{{\"requestId\":1}}}}\n{{\"jsonrpc\""
    );
    // Written in small pieces, so lines arrive split across reads.
    let writer = tokio::spawn(async move {
        for piece in input.as_bytes().chunks(7) {
            client.write_all(piece).await.unwrap();
            tokio::task::yield_now().await;
        }
        client
    });

    let first = transport.receive().await.unwrap();
    assert_eq!(request_id_of(&first), json!(1));
    // The over-long call is dropped and answered, the non-message is answered with Invalid
    // Request, the garbage is ignored, and the ping after them arrives.
    let ping = transport.receive().await.unwrap();
    assert!(
        matches!(
            &ping,
            JsonRpcMessage::Request(JsonRpcRequest {
                request: ClientRequest::PingRequest(_),
                ..
            })
        ),
        "{ping:?}"
    );
    assert_eq!(request_id_of(&ping), json!(3));
    let mut answers = Vec::new();
    for _ in 0..2 {
        answers.push(next_reply(&mut replies).await);
    }
    answers.sort_by_key(|answer| answer["id"].to_string());
    assert_eq!(answers[0]["id"], json!(2), "{answers:?}");
    assert_eq!(answers[0]["error"]["code"], json!(-32600), "{answers:?}");
    assert_eq!(
        answers[0]["error"]["message"],
        "the request is longer than 200 bytes, the most gimlet reads in one message; send less \
         in one call"
    );
    assert!(answers[1]["id"].is_null(), "{answers:?}");
    assert_eq!(answers[1]["error"]["code"], json!(-32600), "{answers:?}");
    let cancelled = transport.receive().await.unwrap();
    assert!(
        matches!(
            &cancelled,
            JsonRpcMessage::Notification(n)
                if matches!(n.notification, ClientNotification::CancelledNotification(_))
        ),
        "{cancelled:?}"
    );
    // The stream ends inside a line: nothing more to deliver.
    drop(writer.await.unwrap());
    assert!(transport.receive().await.is_none());
}

#[tokio::test]
async fn a_receive_dropped_mid_line_loses_nothing() {
    let (mut transport, mut client, _replies) = transport(MAX_LINE);
    client
        .write_all(br#"{"jsonrpc":"2.0","id":5,"method":"tools/c"#)
        .await
        .unwrap();
    let pending =
        tokio::time::timeout(std::time::Duration::from_millis(50), transport.receive()).await;
    assert!(pending.is_err(), "a half line was delivered");
    client
        .write_all(b"all\",\"params\":{\"name\":\"ls\"}}\n")
        .await
        .unwrap();
    let message = transport.receive().await.unwrap();
    assert_eq!(request_id_of(&message), json!(5));
}

#[tokio::test]
async fn the_buffer_of_a_large_message_is_not_kept() {
    let (mut transport, mut client, _replies) = transport(MAX_LINE);
    let content = "x".repeat(4 * KEEP_LINE);
    let large = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "write", "arguments": {"path": "a", "content": content}}});
    let writer = tokio::spawn(async move {
        client
            .write_all(format!("{large}\n").as_bytes())
            .await
            .unwrap();
        client
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n")
            .await
            .unwrap();
        client
    });
    assert_eq!(request_id_of(&transport.receive().await.unwrap()), json!(1));
    assert!(
        transport.line.capacity() <= KEEP_LINE,
        "{}",
        transport.line.capacity()
    );
    assert_eq!(request_id_of(&transport.receive().await.unwrap()), json!(2));
    drop(writer.await.unwrap());
}

#[tokio::test]
async fn messages_go_out_one_per_line() {
    let (mut transport, _client, mut replies) = transport(MAX_LINE);
    // Sent concurrently, as rmcp does: each message still arrives whole, on its own line.
    for i in 0..20 {
        tokio::spawn(transport.send(TxJsonRpcMessage::<RoleServer>::response(
            ServerResult::empty(()),
            RequestId::Number(i),
        )));
    }
    let mut ids = Vec::new();
    for _ in 0..20 {
        let message = next_reply(&mut replies).await;
        assert_eq!(message["jsonrpc"], "2.0");
        ids.push(message["id"].as_i64().unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
    transport.close().await.unwrap();
    let after = transport
        .send(TxJsonRpcMessage::<RoleServer>::response(
            ServerResult::empty(()),
            RequestId::Number(99),
        ))
        .await;
    assert!(after.is_err());
}

#[tokio::test]
async fn large_answers_are_written_as_encoded_and_arrive_whole() {
    use rmcp::model::{CallToolResult, ContentBlock};
    let (mut transport, _client, mut replies) = transport(MAX_LINE);
    // Text with everything JSON escapes, over the streaming threshold, and not a multiple of
    // the piece size.
    let text: String = "line \"one\"\t\\ é 🦀\n"
        .repeat(STREAM_FROM / 10)
        .chars()
        .take(STREAM_FROM + PIECE / 3)
        .collect();
    assert!(text.len() >= STREAM_FROM);
    let large = |id: i64| {
        TxJsonRpcMessage::<RoleServer>::response(
            ServerResult::CallToolResult(CallToolResult::success(vec![ContentBlock::text(
                text.clone(),
            )])),
            RequestId::Number(id),
        )
    };
    let expected = serde_json::to_value(large(0)).unwrap();
    // Large and small answers sent concurrently: each arrives whole, on its own line.
    for i in 0..6 {
        if i % 2 == 0 {
            tokio::spawn(transport.send(large(i)));
        } else {
            tokio::spawn(transport.send(TxJsonRpcMessage::<RoleServer>::response(
                ServerResult::empty(()),
                RequestId::Number(i),
            )));
        }
    }
    let mut ids = Vec::new();
    for _ in 0..6 {
        let mut message = next_reply(&mut replies).await;
        let id = message["id"].as_i64().unwrap();
        if id % 2 == 0 {
            message["id"] = json!(0);
            assert!(message == expected, "answer {id} differs");
        }
        ids.push(id);
    }
    ids.sort_unstable();
    assert_eq!(ids, (0..6).collect::<Vec<_>>());
}

#[test]
fn only_results_with_large_payloads_are_streamed() {
    use rmcp::model::{CallToolResult, ContentBlock};
    let with = |text: String| {
        TxJsonRpcMessage::<RoleServer>::response(
            ServerResult::CallToolResult(CallToolResult::success(vec![
                ContentBlock::text(text.clone()),
                ContentBlock::text(text),
            ])),
            RequestId::Number(1),
        )
    };
    assert_eq!(payload_size(&with("x".repeat(10))), 20);
    assert!(payload_size(&with("x".repeat(STREAM_FROM / 2))) >= STREAM_FROM);
    assert_eq!(
        payload_size(&TxJsonRpcMessage::<RoleServer>::response(
            ServerResult::empty(()),
            RequestId::Number(2)
        )),
        0
    );
}

/// `depth` arrays one inside the other.
fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn only_requests_have_an_id_to_answer() {
    let deep = nested(200);
    let cases = [
        (
            format!(r#"{{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{deep}}}"#),
            Some(json!(4)),
        ),
        (
            format!(r#"{{"params":{deep},"id":"x","method":"ping"}}"#),
            Some(json!("x")),
        ),
        // A notification, a response and an error reply have no id of the client's to answer.
        (
            format!(r#"{{"jsonrpc":"2.0","method":"notifications/x","params":{deep}}}"#),
            None,
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":"e1","result":{deep}}}"#),
            None,
        ),
        (
            format!(r#"{{"jsonrpc":"2.0","id":5,"method":"m","error":{deep}}}"#),
            None,
        ),
        (
            String::from(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            None,
        ),
        // What comes before an error is read: a request cut short or malformed further on.
        (String::from(r#"{"id":1,"method":"ping""#), Some(json!(1))),
        (
            String::from(r#"{"jsonrpc":"2.0","id":2,"method":"ping",}"#),
            Some(json!(2)),
        ),
        (
            String::from(
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write","arguments":{"content":"abc"#,
            ),
            Some(json!(3)),
        ),
        // ... but not what comes after it.
        (
            String::from(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"wr"#),
            None,
        ),
        (
            String::from(r#"{"jsonrpc":"2.0","id":4,"params":[,"method":"x"}"#),
            None,
        ),
        // Not an object, or not JSON at all.
        (format!(r#"[{{"id":1,"method":"ping"}},{deep}]"#), None),
        (String::from("id: 1"), None),
        (String::new(), None),
    ];
    for (line, expected) in cases {
        let id = request_id(line.as_bytes()).map(|id| serde_json::to_value(id).unwrap());
        assert_eq!(id, expected, "{line}");
    }
}

#[test]
fn an_unreadable_request_is_told_why() {
    let deep = serde_json::from_str::<Value>(&nested(200)).unwrap_err();
    assert_eq!(
        unreadable(&deep).message,
        "the request is nested more than 128 levels deep, deeper than gimlet reads; send it \
         with less nesting"
    );
    assert_eq!(unreadable(&deep).code, rmcp::model::ErrorCode::PARSE_ERROR);
    let bad = serde_json::from_slice::<Value>(b"\"\xff\"").unwrap_err();
    assert!(
        unreadable(&bad)
            .message
            .starts_with("cannot read the request as JSON: invalid unicode code point"),
        "{bad}"
    );
}

#[tokio::test]
async fn requests_that_cannot_be_delivered_are_answered_with_their_id() {
    let (mut transport, mut client, mut replies) = transport(MAX_LINE);
    let deep = nested(200);
    let input = format!(
        "{}\n{}\n{}\n{}\n{}\n",
        // Answered: a request too deep to parse, and one that is no JSON-RPC 2.0 message.
        format_args!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"read","arguments":{{"path":{deep}}}}}}}"#
        ),
        r#"{"jsonrpc":"1.0","id":"v1","method":"ping"}"#,
        // Not answered: a notification and a response just as deep.
        format_args!(r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{deep}}}"#),
        format_args!(r#"{{"jsonrpc":"2.0","id":"e1","result":{deep}}}"#),
        r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#,
    );
    client.write_all(input.as_bytes()).await.unwrap();
    let ping = transport.receive().await.unwrap();
    assert_eq!(request_id_of(&ping), json!(8));
    let mut answers = Vec::new();
    for _ in 0..2 {
        let answer = next_reply(&mut replies).await;
        answers.push((answer["id"].clone(), answer["error"]["code"].clone()));
    }
    answers.sort_by_key(|(id, _)| id.to_string());
    assert_eq!(
        answers,
        [(json!("v1"), json!(-32600)), (json!(7), json!(-32700))]
    );
    // Nothing else was answered.
    transport.close().await.unwrap();
    let mut rest = String::new();
    replies.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "");
}

#[tokio::test]
async fn an_over_long_request_is_answered_when_its_head_names_it() {
    let (mut transport, mut client, mut replies) = transport(100);
    let content = "x".repeat(5000);
    let input = [
        // The id before the cut: answered.
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"write","arguments":{{"content":"{content}"}}}}}}"#
        ),
        // The id after it, a notification, and a response: not answered.
        format!(
            r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"write","arguments":{{"content":"{content}"}}}},"id":2}}"#
        ),
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/x","params":"{content}"}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":3,"result":"{content}"}}"#),
        String::from(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#),
    ]
    .join("\n")
        + "\n";
    client.write_all(input.as_bytes()).await.unwrap();
    let ping = transport.receive().await.unwrap();
    assert_eq!(request_id_of(&ping), json!(4));
    let answer = next_reply(&mut replies).await;
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
    transport.close().await.unwrap();
    let mut rest = String::new();
    replies.read_to_string(&mut rest).await.unwrap();
    assert_eq!(rest, "");
}

#[test]
fn sizes_are_said_in_mib_when_whole() {
    assert_eq!(size(MAX_LINE), "16 MiB");
    assert_eq!(size(200), "200 bytes");
    assert_eq!(size((1 << 20) + 1), "1048577 bytes");
}
