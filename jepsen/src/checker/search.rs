//! The Wing–Gong / Lowe linearizability search (the algorithm of Knossos
//! and Porcupine), with memoization of (linearized set, state), over any
//! sequential model of one object.

use crate::history::Op;
use std::collections::HashSet;
use std::hash::Hash;

/// States the search may visit per object before it answers unknown.
const BUDGET: usize = 2_000_000;

/// A sequential model: the states one operation may lead to from a state
/// (none: it cannot happen there).
pub(super) trait Model {
    type State: Clone + Eq + Hash;
    type Op;
    fn step(&self, s: &Self::State, e: &Entry<Self::Op>) -> Vec<Self::State>;
}

/// One operation: what it did and when.
pub(super) struct Entry<K> {
    pub(super) op: K,
    pub(super) call: u64,
    /// `None`: never returned (info): may linearize any time after `call`,
    /// or never.
    pub(super) ret: Option<u64>,
    pub(super) ops: Vec<Op>,
}

/// Outcome of one lock's search.
pub(super) enum Search {
    /// Linearizable; how many states the search visited.
    Ok(usize),
    /// Not linearizable: the last ops placed and the one that could not be.
    Fail(Vec<Op>),
    /// The budget ran out first.
    GaveUp,
}

pub(super) fn search<M: Model>(model: &M, init: M::State, entries: &[Entry<M::Op>]) -> Search {
    // Events: (time, is_return, entry). At equal times returns come first:
    // an op that started exactly when another ended may not be ordered
    // before it.
    let mut events: Vec<(u64, bool, usize)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        events.push((e.call, false, i));
        if let Some(r) = e.ret {
            events.push((r, true, i));
        }
    }
    events.sort_by_key(|&(t, is_ret, i)| (t, !is_ret, i));
    let n = events.len();
    const END: usize = usize::MAX;
    // A doubly linked list over the events, with a head sentinel at n.
    let head = n;
    let mut next: Vec<usize> = (0..=n)
        .map(|k| if k + 1 < n { k + 1 } else { END })
        .collect();
    next[head] = if n > 0 { 0 } else { END };
    let mut prev: Vec<usize> = (0..=n).map(|k| if k == 0 { head } else { k - 1 }).collect();
    let mut call_ev = vec![END; entries.len()];
    let mut ret_ev = vec![END; entries.len()];
    for (k, &(_, is_ret, i)) in events.iter().enumerate() {
        if is_ret {
            ret_ev[i] = k;
        } else {
            call_ev[i] = k;
        }
    }
    fn unlink(next: &mut [usize], prev: &mut [usize], k: usize) {
        let (p, q) = (prev[k], next[k]);
        next[p] = q;
        if q != usize::MAX {
            prev[q] = p;
        }
    }
    fn relink(next: &mut [usize], prev: &mut [usize], k: usize) {
        let (p, q) = (prev[k], next[k]);
        next[p] = k;
        if q != usize::MAX {
            prev[q] = k;
        }
    }
    // Ops that must still linearize (those that returned).
    let mut pending = entries.iter().filter(|e| e.ret.is_some()).count();
    let words = entries.len().div_ceil(64).max(1);
    let mut done = vec![0u64; words];
    let mut cache: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    // (entry, state before it, its other outcomes still to try)
    let mut stack: Vec<(usize, M::State, Vec<M::State>)> = Vec::new();
    let mut state = init;
    let mut cursor = next[head];
    let mut visited = 0usize;
    let mut deepest: Vec<usize> = Vec::new();
    let take = |i: usize,
                next: &mut [usize],
                prev: &mut [usize],
                done: &mut [u64],
                pending: &mut usize| {
        done[i / 64] |= 1 << (i % 64);
        unlink(next, prev, call_ev[i]);
        if ret_ev[i] != END {
            unlink(next, prev, ret_ev[i]);
            *pending -= 1;
        }
    };
    let untake = |i: usize,
                  next: &mut [usize],
                  prev: &mut [usize],
                  done: &mut [u64],
                  pending: &mut usize| {
        done[i / 64] &= !(1 << (i % 64));
        if ret_ev[i] != END {
            relink(next, prev, ret_ev[i]);
            *pending += 1;
        }
        relink(next, prev, call_ev[i]);
    };
    loop {
        if pending == 0 {
            // Whatever is left never returned and may never have happened.
            return Search::Ok(visited);
        }
        visited += 1;
        if visited > BUDGET {
            return Search::GaveUp;
        }
        let at_return = cursor == END || events[cursor].1;
        if !at_return {
            let i = events[cursor].2;
            let mut outcomes = model.step(&state, &entries[i]);
            let mut advanced = false;
            while let Some(s2) = outcomes.pop() {
                done[i / 64] |= 1 << (i % 64);
                let fresh = cache.insert((done.clone(), s2.clone()));
                done[i / 64] &= !(1 << (i % 64));
                if fresh {
                    take(i, &mut next, &mut prev, &mut done, &mut pending);
                    let before = std::mem::replace(&mut state, s2);
                    stack.push((i, before, outcomes));
                    cursor = next[head];
                    advanced = true;
                    break;
                }
            }
            if !advanced {
                cursor = next[cursor];
            }
            continue;
        }
        // An op returned before it could be placed: undo the last choice.
        if stack.len() >= deepest.len() {
            deepest = stack.iter().map(|s| s.0).collect();
            if cursor != END {
                deepest.push(events[cursor].2);
            }
        }
        let Some((j, before, mut alts)) = stack.pop() else {
            return Search::Fail(counterexample(entries, &deepest));
        };
        untake(j, &mut next, &mut prev, &mut done, &mut pending);
        state = before.clone();
        // The same op with another outcome, if one is new.
        let mut retried = false;
        while let Some(alt) = alts.pop() {
            done[j / 64] |= 1 << (j % 64);
            let fresh = cache.insert((done.clone(), alt.clone()));
            done[j / 64] &= !(1 << (j % 64));
            if fresh {
                take(j, &mut next, &mut prev, &mut done, &mut pending);
                stack.push((j, before.clone(), alts));
                state = alt;
                cursor = next[head];
                retried = true;
                break;
            }
        }
        if !retried {
            cursor = next[call_ev[j]];
        }
    }
}

fn counterexample<K>(entries: &[Entry<K>], path: &[usize]) -> Vec<Op> {
    // The last few ops that did linearize, and the one that could not.
    let tail = &path[path.len().saturating_sub(6)..];
    tail.iter().flat_map(|&i| entries[i].ops.clone()).collect()
}
