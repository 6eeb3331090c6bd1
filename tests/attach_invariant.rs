//! The point of the whole design: for every connection, the snapshot followed
//! by its `entry` frames is exactly the session log, line for line — for a
//! client connecting at any instant, however slowly it reads.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A panic in a test is its failure.

mod harness;

use std::time::Duration;

use harness::{slow_text_reply, Client, Pod};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// Asserts `view` is exactly the first `view.len()` lines of the log.
fn assert_prefix_of_log(who: &str, view: &[(String, u64, Value)], log: &[Value], session: &str) {
    assert!(!view.is_empty(), "{who}: saw no entries at all");
    assert!(
        view.len() <= log.len(),
        "{who}: saw more entries than the log holds"
    );
    for (i, (sid, seq, entry)) in view.iter().enumerate() {
        assert_eq!(sid, session, "{who}: frame {i} from another session");
        assert_eq!(
            *seq,
            log[i]["seq"].as_u64().unwrap(),
            "{who}: gap or duplicate at {i}"
        );
        assert_eq!(
            entry, &log[i]["entry"],
            "{who}: entry {i} differs from the log"
        );
    }
}

#[test]
fn random_attaches_during_back_to_back_turns_see_exactly_the_log() {
    let turns = 12;
    let pod = Pod::start();
    let mut driver = pod.client();
    driver.until_type("snapshot");
    for i in 0..turns {
        driver.run(&format!("message {i}"));
    }
    let seed: u64 = rand::random();
    eprintln!("seed {seed}");
    let socket = pod.socket.clone();
    let observers: Vec<_> = (0..16)
        .map(|i| {
            let socket = socket.clone();
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(i));
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(rng.gen_range(0..2500)));
                let mut client = Client::connect(&socket);
                let slow = rng.gen_bool(0.3);
                // Half read to the end of the last turn; the rest hang up
                // abruptly after a random number of frames.
                let budget = if rng.gen_bool(0.5) {
                    usize::MAX
                } else {
                    rng.gen_range(1..200)
                };
                let mut turn_ends = 0;
                for _ in 0..budget {
                    let Some(frame) = client.next() else { break };
                    if slow {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    if frame["type"] == "snapshot" {
                        turn_ends += frame["entries"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .filter(|l| l["entry"]["kind"] == "turn_end")
                            .count();
                    }
                    if frame["type"] == "entry" && frame["entry"]["kind"] == "turn_end" {
                        turn_ends += 1;
                    }
                    if turn_ends == turns {
                        break;
                    }
                }
                (format!("observer {i} (slow: {slow})"), client.log_view())
            })
        })
        .collect();
    let mut ended = 0;
    while ended < turns {
        driver.until_entry("turn_end");
        ended += 1;
    }
    let log = pod.log_lines();
    let session = log[0]["entry"]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(
        log.len(),
        2 + turns * 3,
        "session_start, the environment, then each turn: user_input, assistant text, turn_end"
    );
    assert_prefix_of_log("driver", &driver.log_view(), &log, &session);
    assert_eq!(driver.log_view().len(), log.len());
    for observer in observers {
        let (who, view) = observer.join().unwrap();
        assert_prefix_of_log(&who, &view, &log, &session);
    }
}

#[test]
fn a_client_attaching_mid_turn_sees_the_in_flight_user_input() {
    let pod = Pod::builder().script(&slow_text_reply(40, 25)).start();
    let mut a = pod.client();
    a.until_type("snapshot");
    a.run("long job");
    a.until_entry("user_input");
    let mut b = pod.client();
    let snapshot = b.until_type("snapshot");
    let entries = snapshot["entries"].as_array().unwrap();
    // The input, and perhaps the environment entry committed after it.
    let input = &entries
        .iter()
        .rev()
        .find(|l| l["entry"]["kind"] == "user_input")
        .expect("the in-flight user input")["entry"];
    assert_eq!(
        input["segments"],
        json!([{"type":"text","text":"long job"}])
    );
    assert_eq!(snapshot["status"]["state"], "running");
}

#[test]
fn a_client_attaching_mid_answer_gets_the_partial_block_then_exactly_the_rest() {
    let pod = Pod::builder().script(&slow_text_reply(60, 15)).start();
    let mut a = pod.client();
    a.until_type("snapshot");
    a.run("stream please");
    for _ in 0..5 {
        a.until_type("text_delta");
    }
    let mut b = pod.client();
    let snapshot = b.until_type("snapshot");
    let in_flight = &snapshot["in_flight"];
    assert_eq!(in_flight["type"], "text", "snapshot: {snapshot}");
    let mut text = in_flight["text"].as_str().unwrap().to_owned();
    assert!(
        text.starts_with("w0 w1 w2 w3 w4 "),
        "partial block: {text:?}"
    );
    let entry = loop {
        let frame = b.next().expect("connection closed");
        match frame["type"].as_str().unwrap() {
            "text_delta" => text.push_str(frame["text"].as_str().unwrap()),
            "entry" if frame["entry"]["kind"] == "assistant_items" => break frame,
            _ => {}
        }
    };
    let committed = entry["entry"]["items"][0]["text"].as_str().unwrap();
    assert_eq!(
        text, committed,
        "in_flight + deltas must rebuild the block exactly"
    );
    // And nothing of that block arrives after its entry.
    let next = b.until(|v| v["type"] != "status" && v["type"] != "usage");
    assert_eq!(next["entry"]["kind"], "turn_end", "got {next}");
}
