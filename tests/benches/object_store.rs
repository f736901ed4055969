//! Upload throughput to Garage: how fast the media agent's S3 store empties its spool.
//!
//! `cargo bench -p platform-tests --bench object_store` (Garage from scripts/test's
//! target/tools/garage, or GARAGE_BIN). A Garage of its own on loopback; segments of a
//! full ladder's sizes (2 s at 2.5 Mbit/s, 1.4, 0.8 and 0.5: about 1.3 MB per 2 s of all
//! four) written to the spool as fast as the disk takes them, then timed until the store
//! has them all; then the same bytes as plain signed PUTs in a row, without the spool.
//! Prints MB/s and segments/s, and how many seconds of a full ladder one second uploads.

use media_agent::media_store::MediaStore;
use media_agent::media_store::s3::S3Store;
use platform_tests::garage::Garage;
use std::time::{Duration, Instant};

/// Bytes of one 2-second segment of each rendition.
const RENDITIONS: [usize; 4] = [625_000, 350_000, 200_000, 125_000];

fn segment(bytes: usize, seed: usize) -> Vec<u8> {
    // MPEG-TS-like packets of varied content (Garage compresses nothing by default,
    // but keep it honest).
    (0..bytes)
        .map(|i| {
            if i % 188 == 0 {
                0x47
            } else {
                ((i * 31 + seed * 7) % 251) as u8
            }
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let seconds_of_show: usize = std::env::var("SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let garage = Garage::start().await;
    let spool = tempfile::tempdir().unwrap();
    let store = S3Store::new(garage.settings(), spool.path()).unwrap();
    let mut files = Vec::new();
    for n in 0..seconds_of_show / 2 {
        for (i, bytes) in RENDITIONS.iter().enumerate() {
            files.push((
                format!("replays/bench/v{i}_{n}.ts"),
                segment(*bytes, n * 4 + i),
            ));
        }
    }
    let total: usize = files.iter().map(|(_, b)| b.len()).sum();
    let mb = total as f64 / 1e6;

    let started = Instant::now();
    for (object, bytes) in &files {
        store.put(object, bytes).unwrap();
    }
    store.put("replays/bench/v0.m3u8", b"#EXTM3U\n").unwrap();
    let spooled = started.elapsed();
    while !store.flushed("replays/bench") {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let uploaded = started.elapsed();
    let secs = uploaded.as_secs_f64();
    println!(
        "spool to Garage: {} segments, {mb:.1} MB ({seconds_of_show} s of a 4-rendition ladder): \
         spooled in {:.2} s, all in Garage after {secs:.2} s",
        files.len(),
        spooled.as_secs_f64()
    );
    println!(
        "  {:.1} MB/s, {:.0} segments/s: one second uploads {:.0} s of the ladder",
        mb / secs,
        files.len() as f64 / secs,
        seconds_of_show as f64 / secs
    );

    // The same bytes as plain PUTs, one after the other, through the same client.
    let client = garage.client();
    let started = Instant::now();
    for (object, bytes) in &files {
        client
            .put(&object.replace("bench", "direct"), bytes.clone())
            .await
            .unwrap();
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "direct PUTs: {mb:.1} MB in {secs:.2} s: {:.1} MB/s, {:.0} segments/s",
        mb / secs,
        files.len() as f64 / secs
    );
    assert_eq!(garage.list("replays/bench").await.len(), files.len() + 1);
    drop(store);
}
