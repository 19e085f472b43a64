//! Fuzz target for the frame decoder (PROTO-6, PROTO-5): arbitrary bytes go through a keyed
//! and an unkeyed `FrameReceiver`. Neither may panic; whatever decodes must encode again and
//! decode back to the same envelope; the keyed receiver accepts nothing but authentic frames
//! (the fuzzer cannot compute a tag), and nothing is accepted twice.

#![no_main]

use conclave_protocol::{
    AuthKey, ClusterId, DEFAULT_TAG_LEN, Envelope, FrameCodec, FrameError, FrameReceiver,
};
use libfuzzer_sys::fuzz_target;

/// The cluster the receivers belong to; the seed corpus in the README uses it too.
const CLUSTER: &str = "site-1";
const KEY: &[u8] = b"conclave-demo-key-site-1";

fuzz_target!(|frame: &[u8]| {
    let cluster = ClusterId::new(CLUSTER).expect("valid cluster id");
    let key = AuthKey::new(KEY, DEFAULT_TAG_LEN).expect("valid key");

    let plain = FrameCodec::new(cluster, None);
    if let Ok(envelope) = receive_twice(&plain, frame) {
        round_trip(&plain, &envelope);
    }

    let keyed = FrameCodec::new(cluster, Some(key));
    if let Ok(envelope) = receive_twice(&keyed, frame) {
        // The fuzzer cannot compute a tag, so an accepted frame is an authentic one from the
        // seed corpus, byte for byte what the encoder writes; anything else is a forgery.
        round_trip(&keyed, &envelope);
        let authentic = keyed
            .encode(&envelope, usize::MAX)
            .expect("a decoded envelope encodes");
        assert_eq!(
            frame,
            &authentic[..],
            "keyed receiver accepted a forged frame"
        );
    }
});

/// Receives `frame` on a fresh receiver, then again: the second time it must be a replay if
/// the first was accepted, and the same error otherwise.
fn receive_twice(codec: &FrameCodec, frame: &[u8]) -> Result<Envelope, FrameError> {
    let mut receiver = FrameReceiver::new(codec.clone());
    let first = receiver.receive(frame);
    let second = receiver.receive(frame);
    match &first {
        Ok(envelope) => assert_eq!(
            second,
            Err(FrameError::Replay {
                from: envelope.from,
                incarnation: envelope.incarnation,
                seq: envelope.seq,
            })
        ),
        Err(err) => assert_eq!(second.as_ref(), Err(err)),
    }
    first
}

/// Encodes a decoded envelope again and checks it decodes to itself. The bytes may differ
/// from the input: the decoder accepts wider encodings than the encoder writes.
fn round_trip(codec: &FrameCodec, envelope: &Envelope) {
    let frame = codec
        .encode(envelope, usize::MAX)
        .expect("a decoded envelope encodes");
    assert_eq!(codec.decode(&frame).as_ref(), Ok(envelope));
    let again = codec.encode(envelope, usize::MAX).expect("encodes twice");
    assert_eq!(again, frame, "encoding is deterministic");
}
