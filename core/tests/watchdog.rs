//! Scripted tests of the watchdog's policy (F2): when it extends, what each
//! extension's outcome means, and when the lock is lost.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod common;

use common::*;
use redlock_core::{Config, Extension, Loss, Operation, WatchAction, Watchdog};

#[test]
fn extends_at_a_third_left_and_reschedules_from_the_extended_lock() {
    // Valid until 988 ms; a third of 988 is 329; margin max(2 x 10, 98.8).
    let (lock, servers) = held_lock(3, 1_000);
    let mut dog = Watchdog::new(&lock, dur(10));
    let renewal = lock.renewal(dur(10));
    assert_eq!(dog.give_up_at(), renewal.give_up_at);
    assert_eq!(dog.poll(ms(0)), WatchAction::Wait(renewal.extend_at));
    assert_eq!(dog.poll(renewal.extend_at), WatchAction::Extend);
    // While it runs: no second extension, and the loss time bounds the wait.
    assert_eq!(
        dog.poll(renewal.extend_at),
        WatchAction::Wait(renewal.give_up_at)
    );
    // The extension, through the core's Extend.
    let mut d = extend(&Config::DEFAULT, &servers, &lock, 1_000, ms(660));
    d.sent(ms(660));
    for server in 0..3 {
        d.reply(ms(662), server, b":1\r\n").unwrap();
    }
    assert!(d.op.is_finished());
    let extended = d.outcome().unwrap().unwrap();
    dog.handle_extension(ms(662), Extension::Extended(&extended));
    let next = extended.renewal(dur(10));
    assert_eq!(dog.give_up_at(), next.give_up_at);
    assert_eq!(dog.poll(ms(663)), WatchAction::Wait(next.extend_at));
}

#[test]
fn a_failed_extension_is_tried_again_after_a_request_timeout_until_the_margin() {
    let (lock, _) = held_lock(3, 1_000);
    let mut dog = Watchdog::new(&lock, dur(10));
    let renewal = lock.renewal(dur(10));
    let mut now = renewal.extend_at;
    let mut tries = 0;
    loop {
        match dog.poll(now) {
            WatchAction::Extend => {
                tries += 1;
                dog.handle_extension(now, Extension::Failed);
            }
            WatchAction::Wait(t) => {
                assert!(t > now);
                assert!(t <= renewal.give_up_at);
                now = t;
            }
            WatchAction::Lost(why) => {
                assert_eq!(why, Loss::Unavailable);
                break;
            }
        }
    }
    assert_eq!(now, renewal.give_up_at, "lost at the margin, not before");
    // From 659 to 889: every 10 ms.
    let window = renewal
        .give_up_at
        .saturating_duration_since(renewal.extend_at);
    assert_eq!(tries, window.as_micros().div_ceil(10_000));
    // Lost stays lost.
    assert_eq!(dog.poll(ms(5_000)), WatchAction::Lost(Loss::Unavailable));
}

#[test]
fn not_held_is_lost_at_once_and_the_limit_gives_up_at_the_margin() {
    let (lock, _) = held_lock(3, 1_000);
    let renewal = lock.renewal(dur(10));
    let mut dog = Watchdog::new(&lock, dur(10));
    assert_eq!(dog.poll(renewal.extend_at), WatchAction::Extend);
    dog.handle_extension(renewal.extend_at, Extension::NotHeld);
    assert_eq!(
        dog.poll(renewal.extend_at),
        WatchAction::Lost(Loss::NotHeld)
    );

    let mut dog = Watchdog::new(&lock, dur(10));
    assert_eq!(dog.poll(renewal.extend_at), WatchAction::Extend);
    dog.handle_extension(renewal.extend_at, Extension::LimitReached);
    assert_eq!(
        dog.poll(renewal.extend_at),
        WatchAction::Wait(renewal.give_up_at)
    );
    assert_eq!(
        dog.poll(renewal.give_up_at),
        WatchAction::Lost(Loss::ExtensionLimit)
    );

    // No room to run it yet: asked again at once.
    let mut dog = Watchdog::new(&lock, dur(10));
    assert_eq!(dog.poll(renewal.extend_at), WatchAction::Extend);
    dog.handle_extension(renewal.extend_at, Extension::NotStarted);
    assert_eq!(dog.poll(renewal.extend_at), WatchAction::Extend);
}

#[test]
fn a_watchdog_woken_past_the_margin_loses_the_lock() {
    // A process paused past its lock's margin must not extend (A8).
    let (lock, _) = held_lock(3, 1_000);
    let mut dog = Watchdog::new(&lock, dur(10));
    assert_eq!(
        dog.poll(lock.valid_until()),
        WatchAction::Lost(Loss::Unavailable)
    );
}
