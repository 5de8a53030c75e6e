//! Asking on MCP 2026-07-28: input-required results and sealed request state (SEP-2322).
//!
//! A 2026-07-28 server may not send requests to the client. When a call must ask, it ends with
//! an `InputRequiredResult` carrying the question (an elicitation under [`INPUT_KEY`]) and a
//! request state; the client asks the user and sends the whole `tools/call` again with the
//! answer and the state. The call then runs from the top, and when it reaches the same ask it
//! finds the answer.
//!
//! The state comes back from the client, so it is untrusted. It is sealed with an HMAC
//! ([`RequestStateCodec`], a key made at start-up) bound to the tool and its exact arguments,
//! expires after [`STATE_TTL`], and carries a nonce that is accepted once: a forged, altered,
//! expired, replayed or transplanted (other arguments) state is refused, and the call does
//! not run. The answer is bound to the question: it applies only to the ask it was given
//! for, and if what the call would do changed since (a different diff), it is refused as
//! stale.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use gimlet_tools::fs::ContentHash;
use gimlet_tools::util::MutexExt as _;
use gimlet_tools::{Answer, Approval, AskRequest, Question};
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, RequestStateCodec, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The key of gimlet's question in `inputRequests` / `inputResponses`.
pub(crate) const INPUT_KEY: &str = "gimlet_ask";

/// How long a question's state stays valid: as long as the legacy elicitation waits.
pub(crate) const STATE_TTL: Duration = crate::form::DEFAULT_ASK_TIMEOUT;

/// Seals and opens request state; remembers the nonces already used.
pub(crate) struct Sealer {
    codec: RequestStateCodec,
    used: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer").finish_non_exhaustive()
    }
}

/// What the sealed state says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RoundState {
    /// Accepted once.
    nonce: String,
    /// Asks answered in earlier rounds of this call: ask key -> the answer's meaning.
    answered: BTreeMap<String, Value>,
    /// The ask this round's answer is for.
    pending: Option<PendingKey>,
}

/// The ask a state was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PendingKey {
    /// What was asked (tool, summary, reason, accesses).
    key: String,
    /// What was shown besides (the diff): a change means the answer is outdated.
    detail: String,
}

impl Sealer {
    /// A sealer with a fresh random key; without the system's randomness, none (a key that
    /// could be guessed would let a client forge its own answers).
    pub(crate) fn new() -> std::io::Result<Self> {
        gimlet_tools::util::random_bytes::<32>().map(Self::with_key)
    }

    fn with_key(key: [u8; 32]) -> Self {
        Self {
            codec: RequestStateCodec::new_unchecked(key.to_vec()),
            used: Mutex::new(HashMap::new()),
        }
    }

    /// What a state is bound to: the tool and its arguments, keys sorted.
    pub(crate) fn binding(params: &CallToolRequestParams) -> Vec<u8> {
        let args = params.arguments.clone().map_or(Value::Null, Value::Object);
        let mut text = String::from(params.name.as_ref());
        text.push('\0');
        canonical(&args, &mut text);
        text.into_bytes()
    }

    fn seal(&self, state: &RoundState, binding: &[u8]) -> String {
        let payload = serde_json::to_vec(state).unwrap_or_default();
        self.codec.seal_with(
            &payload,
            &SealOptions::new().associated_data(binding).ttl(STATE_TTL),
        )
    }

    /// Opens a state sent back by the client, once.
    pub(crate) fn open(&self, sealed: &str, binding: &[u8]) -> Result<RoundState, String> {
        let payload = self.codec.open_with(sealed, binding).map_err(|err| {
            format!(
                "the request state sent back with the answer is not valid for this call \
                 ({err}): it was altered, has expired, or belongs to other arguments"
            )
        })?;
        let state: RoundState = serde_json::from_slice(&payload)
            .map_err(|_| String::from("the request state sent back is not gimlet's"))?;
        let mut used = self.used.locked();
        let now = Instant::now();
        used.retain(|_, at| now.duration_since(*at) < STATE_TTL + Duration::from_secs(60));
        if used.insert(state.nonce.clone(), now).is_some() {
            return Err(String::from(
                "this answer was already used once; an answer applies to one call only",
            ));
        }
        Ok(state)
    }
}

/// JSON with object keys sorted, so the same arguments always bind the same way.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The identity of an ask: what it asks about, not how it is worded at length.
fn ask_key(request: &AskRequest) -> String {
    let text = format!(
        "{}\0{}\0{:?}\0{:?}\0{:?}",
        request.tool, request.summary, request.reason, request.session_pattern, request.accesses
    );
    ContentHash::of(text.as_bytes()).to_string()
}

fn detail_key(request: &AskRequest) -> String {
    ContentHash::of(request.detail.as_deref().unwrap_or_default().as_bytes()).to_string()
}

fn fresh_nonce() -> String {
    crate::new_id("n")
}

/// One run of a call on a 2026-07-28 client: the answer it brought, if any.
pub(crate) struct Round {
    binding: Vec<u8>,
    /// The opened state and the answer, or why they were refused; `None` on a first call.
    brought: Option<Result<(RoundState, Value), String>>,
    /// Asks answered so far (from earlier rounds and this one).
    answered: Mutex<BTreeMap<String, Value>>,
}

impl Round {
    /// Reads (and verifies) what the call brought back.
    pub(crate) fn new(params: &CallToolRequestParams, sealer: &Sealer) -> Self {
        let binding = Sealer::binding(params);
        let answer = params
            .input_responses
            .as_ref()
            .and_then(|r| r.get(INPUT_KEY))
            .cloned();
        let brought = match (&params.request_state, answer) {
            (None, None) => None,
            (Some(state), Some(answer)) => Some(sealer.open(state, &binding).map(|s| (s, answer))),
            (None, Some(_)) => Some(Err(String::from(
                "an answer came without the request state it belongs to; send the \
                 requestState back unchanged",
            ))),
            // A state without an answer: the client did not ask the user.
            (Some(state), None) => Some(sealer.open(state, &binding).and_then(|_| {
                Err(String::from(
                    "the call came back without an answer to the question",
                ))
            })),
        };
        let answered = match &brought {
            Some(Ok((state, _))) => state.answered.clone(),
            _ => BTreeMap::new(),
        };
        Self {
            binding,
            brought,
            answered: Mutex::new(answered),
        }
    }

    /// Resolves an ask: from an answer brought back, or by returning a question to the client.
    pub(crate) fn approve(
        &self,
        request: &AskRequest,
        sealer: &Sealer,
        answer_to_approval: impl FnOnce(Option<ElicitResult>) -> Approval,
    ) -> Approval {
        let key = ask_key(request);
        let mut answered = self.answered.locked();
        if answered.contains_key(&key) {
            return Approval::Once;
        }
        match &self.brought {
            Some(Err(why)) => return Approval::Unavailable(format!("{why}. Nothing was run.")),
            Some(Ok((state, answer))) => {
                if let Some(pending) = state.pending.as_ref().filter(|p| p.key == key) {
                    if pending.detail != detail_key(request) {
                        return Approval::Outdated(String::from(
                            "the file changed after the user was shown the change, so the \
                             approval no longer matches; read the file again and redo the edit",
                        ));
                    }
                    let answer = serde_json::from_value::<ElicitResult>(answer.clone()).ok();
                    let approval = answer_to_approval(answer);
                    match approval {
                        Approval::Once => {
                            answered.insert(key, json!("once"));
                        }
                        Approval::Session => {
                            answered.insert(key, json!("session"));
                        }
                        _ => {}
                    }
                    return approval;
                }
            }
            None => {}
        }
        let state = RoundState {
            nonce: fresh_nonce(),
            answered: answered.clone(),
            pending: Some(PendingKey {
                key,
                detail: detail_key(request),
            }),
        };
        let message = request.message();
        Approval::Pending(Box::new(gimlet_tools::permission::PendingAsk {
            state: json!({
                "sealed": sealer.seal(&state, &self.binding),
                "message": message,
                "schema": crate::form::approval_schema(request),
            }),
            message,
        }))
    }
}

impl Round {
    /// Resolves a question (`ask_user`): from the answer brought back, or by returning the
    /// question to the client.
    pub(crate) fn question(&self, question: &Question, sealer: &Sealer) -> Answer {
        let key = ContentHash::of(
            format!("question\0{}\0{:?}", question.question, question.options).as_bytes(),
        )
        .to_string();
        match &self.brought {
            Some(Err(why)) => return Answer::Unavailable(why.clone()),
            Some(Ok((state, answer))) if state.pending.as_ref().is_some_and(|p| p.key == key) => {
                let answer = serde_json::from_value::<ElicitResult>(answer.clone()).ok();
                return crate::form::answer_of(answer, question);
            }
            _ => {}
        }
        let answered = self.answered.locked().clone();
        let state = RoundState {
            nonce: fresh_nonce(),
            answered,
            pending: Some(PendingKey {
                key,
                detail: String::new(),
            }),
        };
        Answer::Pending(Box::new(gimlet_tools::permission::PendingAsk {
            state: json!({
                "sealed": sealer.seal(&state, &self.binding),
                "message": gimlet_tools::permission::visible(&question.question),
                "schema": crate::form::question_schema(question),
            }),
            message: gimlet_tools::permission::visible(&question.question).into_owned(),
        }))
    }
}

/// The `InputRequiredResult` for a pending ask.
pub(crate) fn input_required(state: &Value) -> Result<InputRequiredResult, String> {
    let sealed = state["sealed"].as_str().ok_or("no sealed state")?;
    let message = state["message"].as_str().unwrap_or_default().to_owned();
    let Value::Object(schema) = state["schema"].clone() else {
        return Err(String::from("no schema"));
    };
    let schema = ElicitationSchema::from_json_schema(schema).map_err(|e| e.to_string())?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: schema,
    };
    let mut asks = InputRequests::new();
    asks.insert(
        INPUT_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(params)),
    );
    Ok(InputRequiredResult::new(
        Some(asks),
        Some(sealed.to_owned()),
    ))
}

#[cfg(test)]
mod tests {
    use gimlet_tools::permission::AskReason;
    use pretty_assertions::assert_eq;
    use rmcp::model::ElicitationAction;

    use super::*;

    fn request(detail: &str) -> AskRequest {
        AskRequest {
            tool: "write".into(),
            summary: "write /elsewhere/f.txt".into(),
            detail: Some(detail.into()),
            reason: AskReason::OutsideRoots,
            session_pattern: Some("/elsewhere/f.txt".into()),
            accesses: Vec::new(),
        }
    }

    fn params(args: Value, answer: Option<Value>, state: Option<String>) -> CallToolRequestParams {
        let Value::Object(args) = args else { panic!() };
        let mut params = CallToolRequestParams::new("write").with_arguments(args);
        if let Some(answer) = answer {
            params.input_responses = Some([(INPUT_KEY.to_owned(), answer)].into_iter().collect());
        }
        params.request_state = state;
        params
    }

    fn accept(decision: &str) -> Value {
        serde_json::to_value(
            ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({"decision": decision})),
        )
        .unwrap()
    }

    fn to_approval(answer: Option<ElicitResult>) -> Approval {
        crate::form::approval_of(answer, &request("diff"))
    }

    /// The first round: returns the sealed state.
    fn first(keys: &Sealer, args: &Value) -> String {
        let round = Round::new(&params(args.clone(), None, None), keys);
        let Approval::Pending(pending) = round.approve(&request("diff"), keys, to_approval) else {
            panic!("a first call must return the question")
        };
        assert!(pending.message.contains("write /elsewhere/f.txt"));
        input_required(&pending.state).unwrap();
        pending.state["sealed"].as_str().unwrap().to_owned()
    }

    #[test]
    fn an_answer_with_its_state_resolves_the_ask_once() {
        let keys = Sealer::new().unwrap();
        let args = json!({"path": "/elsewhere/f.txt", "content": "x"});
        let sealed = first(&keys, &args);
        let round = Round::new(
            &params(
                args.clone(),
                Some(accept("allow_once")),
                Some(sealed.clone()),
            ),
            &keys,
        );
        assert_eq!(
            round.approve(&request("diff"), &keys, to_approval),
            Approval::Once
        );
        // The same ask again in this run (e.g. a re-judgement) needs no new answer.
        assert_eq!(
            round.approve(&request("diff"), &keys, to_approval),
            Approval::Once
        );
        // Replaying the same state is refused.
        let replay = Round::new(
            &params(args, Some(accept("allow_once")), Some(sealed)),
            &keys,
        );
        let Approval::Unavailable(why) = replay.approve(&request("diff"), &keys, to_approval)
        else {
            panic!()
        };
        assert!(why.contains("already used"), "{why}");
    }

    #[test]
    fn tampered_transplanted_or_missing_state_is_refused() {
        let keys = Sealer::new().unwrap();
        let args = json!({"path": "/elsewhere/f.txt", "content": "x"});
        let sealed = first(&keys, &args);
        let mut tampered = sealed.clone().into_bytes();
        let last = tampered.len() - 3;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        for (args, state) in [
            (args.clone(), Some(tampered)),
            (
                json!({"path": "/elsewhere/f.txt", "content": "other"}),
                Some(sealed.clone()),
            ),
            (args.clone(), None),
            (args.clone(), Some(String::from("garbage"))),
        ] {
            let round = Round::new(&params(args, Some(accept("allow_once")), state), &keys);
            assert!(
                matches!(
                    round.approve(&request("diff"), &keys, to_approval),
                    Approval::Unavailable(_)
                ),
                "must be refused"
            );
        }
        // Another server (another key) does not accept it either.
        let other = Sealer::new().unwrap();
        let round = Round::new(
            &params(args, Some(accept("allow_once")), Some(sealed)),
            &other,
        );
        assert!(matches!(
            round.approve(&request("diff"), &other, to_approval),
            Approval::Unavailable(_)
        ));
    }

    #[test]
    fn an_answer_for_an_older_preview_is_outdated_and_another_ask_asks_again() {
        let keys = Sealer::new().unwrap();
        let args = json!({"path": "/elsewhere/f.txt", "content": "x"});
        let sealed = first(&keys, &args);
        let round = Round::new(
            &params(args.clone(), Some(accept("allow_once")), Some(sealed)),
            &keys,
        );
        assert!(matches!(
            round.approve(&request("another diff"), &keys, to_approval),
            Approval::Outdated(_)
        ));

        let sealed = first(&keys, &args);
        let round = Round::new(
            &params(args, Some(accept("allow_once")), Some(sealed)),
            &keys,
        );
        assert_eq!(
            round.approve(&request("diff"), &keys, to_approval),
            Approval::Once
        );
        let mut second = request("diff");
        second.summary = String::from("run make");
        let Approval::Pending(pending) = round.approve(&second, &keys, to_approval) else {
            panic!("a second ask goes back to the client")
        };
        let state = keys
            .open(
                pending.state["sealed"].as_str().unwrap(),
                &Sealer::binding(&params(
                    json!({"path": "/elsewhere/f.txt", "content": "x"}),
                    None,
                    None,
                )),
            )
            .unwrap();
        assert_eq!(state.answered.len(), 1, "the first answer rides along");
    }

    #[test]
    fn declines_and_odd_answers_are_no() {
        let keys = Sealer::new().unwrap();
        let args = json!({"path": "/elsewhere/f.txt", "content": "x"});
        for answer in [
            serde_json::to_value(ElicitResult::new(ElicitationAction::Decline)).unwrap(),
            serde_json::to_value(ElicitResult::new(ElicitationAction::Cancel)).unwrap(),
            json!({"action": "accept", "content": {"decision": "maybe"}}),
            json!("yes"),
        ] {
            let sealed = first(&keys, &args);
            let round = Round::new(&params(args.clone(), Some(answer), Some(sealed)), &keys);
            assert!(matches!(
                round.approve(&request("diff"), &keys, to_approval),
                Approval::Deny { .. }
            ));
        }
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let mut a = String::new();
        canonical(&json!({"b": 1, "a": [{"y": 2, "x": "s"}]}), &mut a);
        assert_eq!(a, r#"{"a":[{"x":"s","y":2}],"b":1}"#);
    }
}
