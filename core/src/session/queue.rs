//! The requests a session awaits: their entries and the storage trait.

use crate::time::Duration;

/// A request the session waits for a reply to: its owner's tag, and when it
/// is due. Eight bytes with a `u16` tag: a firmware keeps a dozen per
/// server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<T> {
    /// The platform's tag of the request's owner.
    pub tag: T,
    /// Written: its deadline, in microseconds after the session's `base`.
    /// Held behind the handshake: the microseconds it is allowed from when
    /// the handshake passes. 40 bits (12.7 days), in two parts, the high
    /// one in what would be padding after a `u16` tag: no request's
    /// deadline is that far, so `base` never has to move under waiting
    /// entries (a farther one is kept as 12.7 days).
    due_low: u32,
    due_high: u8,
    /// Replies the request has before its answer (a `MULTI` block's `+OK`
    /// and `+QUEUED`s); 0 for a plain command.
    pub(super) more: u8,
}

impl<T> Entry<T> {
    /// The largest `due`: 2^40 - 1 microseconds.
    const MAX_DUE: u64 = (1 << 40) - 1;

    pub(super) fn new(tag: T, due: Duration) -> Self {
        let due = due.as_micros().min(Self::MAX_DUE);
        Entry {
            tag,
            due_low: due as u32,
            due_high: (due >> 32) as u8,
            more: 0,
        }
    }

    pub(super) fn with_more(mut self, more: u8) -> Self {
        self.more = more;
        self
    }

    pub(super) fn due(&self) -> u64 {
        u64::from(self.due_low) | (u64::from(self.due_high) << 32)
    }
}

/// The storage of the requests a session waits for, oldest first: a
/// `heapless::Deque` (fixed room) or a platform's growable queue.
pub trait Queue<T> {
    /// Appends `entry`; gives it back when there is no room.
    fn push_back(&mut self, entry: Entry<T>) -> Result<(), Entry<T>>;
    /// Takes the oldest.
    fn pop_front(&mut self) -> Option<Entry<T>>;
    /// The oldest, left in place.
    fn front(&self) -> Option<&Entry<T>>;
    /// How many there are.
    fn len(&self) -> usize;
    /// True when there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Calls `f` on each, oldest first.
    fn for_each(&self, f: impl FnMut(&Entry<T>));
}

impl<T, const N: usize> Queue<T> for heapless::Deque<Entry<T>, N> {
    fn push_back(&mut self, entry: Entry<T>) -> Result<(), Entry<T>> {
        heapless::Deque::push_back(self, entry)
    }
    fn pop_front(&mut self) -> Option<Entry<T>> {
        heapless::Deque::pop_front(self)
    }
    fn front(&self) -> Option<&Entry<T>> {
        heapless::Deque::front(self)
    }
    fn len(&self) -> usize {
        heapless::Deque::len(self)
    }
    fn is_empty(&self) -> bool {
        heapless::Deque::is_empty(self)
    }
    fn for_each(&self, f: impl FnMut(&Entry<T>)) {
        self.iter().for_each(f);
    }
}
