//! [newsdedup addition] The dictionary as a character-level double-array Aho-Corasick automaton
//! over the *reversed* words, so that one right-to-left pass over a block finds, at every
//! character, every dictionary word that starts there.
//!
//! `cut` needs, for each character of a block, the ends of the dictionary words starting at it
//! (jieba's DAG) and consumes them from the last character to the first (the route). The trie
//! walk finds them by walking afresh from every character, a chain of dependent loads per
//! position. Read right to left, the automaton takes one transition per character (plus the rare
//! failure steps), and its state there lists, shortest first, the words starting at that
//! character: the same edges in the same order, ready for the route as they are found.
//!
//! Layout: characters are mapped to dense codes (most frequent in the dictionary first); state
//! `s` has a transition on code `c` to `t = base[s] + c` iff `check[t] == s`. Each state also
//! holds its failure state and a slice of `outputs`: `(word id << 6) | length in characters` of
//! every dictionary word that is a prefix of the text read from that character, ascending by
//! length. Only words made entirely of characters that can appear in a dictionary block
//! (`is_han_default`) are kept: no other word can match there.

use crate::errors::Error;
use crate::snapshot::{Reader, Writer};
use crate::trie::CharTrie;

const ROOT: u32 = 0;
/// `check` of a cell that is not a state (and of the root, which has no parent).
const EMPTY: u32 = u32::MAX;
/// Output entries pack the word's length in characters in the low bits.
const LEN_BITS: u32 = 6;
const MAX_LEN: usize = (1 << LEN_BITS) - 1;
/// A state's output slice packs its length in the low bits of `out`.
const COUNT_BITS: u32 = 6;
/// Failure steps taken for one character at most; more than any valid automaton (whose states are
/// at most `MAX_LEN` deep) needs, so a damaged one cannot loop.
const MAX_FAIL_STEPS: usize = MAX_LEN + 1;

/// The main CJK block, which nearly every character of a block falls in, is coded by a table.
const CJK_FIRST: u32 = 0x4E00;
const CJK_LEN: usize = 0x5200;

#[derive(Clone, Copy, Default)]
struct Unit {
    base: u32,
    check: u32,
    fail: u32,
    /// Start of the state's slice of `outputs` << COUNT_BITS | its length.
    out: u32,
}

#[derive(Clone)]
pub(crate) struct Automaton {
    /// Code of each character of the main CJK block, 0 for none.
    cjk: Vec<u32>,
    /// Code of each ASCII character, 0 for none.
    ascii: Vec<u32>,
    /// Codes of other characters, sorted by character.
    other: Vec<(u32, u32)>,
    units: Vec<Unit>,
    outputs: Vec<u32>,
}

impl std::fmt::Debug for Automaton {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Automaton")
            .field("units", &self.units.len())
            .field("outputs", &self.outputs.len())
            .finish()
    }
}

impl Automaton {
    /// The automaton of the words in `trie`, or `None` if it does not fit the layout (a word of
    /// more than 63 characters, more than 2^26 words or outputs), when the caller keeps using the
    /// trie walk.
    pub(crate) fn build(trie: &CharTrie) -> Option<Automaton> {
        // Every word, reversed, with its id.
        let nodes = trie.nodes();
        let mut words: Vec<(Vec<char>, u32)> = Vec::new();
        'words: for (node, &(_, _, word_id)) in nodes.iter().enumerate() {
            if word_id < 0 {
                continue;
            }
            let mut word = Vec::new();
            let mut n = node;
            while n != 0 {
                let (parent, ch, _) = nodes[n];
                if !crate::is_han_default(ch) {
                    continue 'words;
                }
                word.push(ch);
                if word.len() > MAX_LEN || parent as usize >= n {
                    return None;
                }
                n = parent as usize;
            }
            words.push((word, u32::try_from(word_id).ok()?));
        }
        if words.len() >= 1 << (32 - LEN_BITS) {
            return None;
        }

        // Codes: the characters of the words, most frequent first.
        let mut freq: rustc_hash::FxHashMap<char, u64> = Default::default();
        for (w, _) in &words {
            for &c in w {
                *freq.entry(c).or_default() += 1;
            }
        }
        let mut by_freq: Vec<(char, u64)> = freq.into_iter().collect();
        by_freq.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut ac = Automaton {
            cjk: vec![0; CJK_LEN],
            ascii: vec![0; 128],
            other: Vec::new(),
            units: Vec::new(),
            outputs: Vec::new(),
        };
        for (i, &(c, _)) in by_freq.iter().enumerate() {
            let code = i as u32 + 1;
            if let Some(slot) = ac.code_slot(c) {
                *slot = code;
            } else {
                ac.other.push((c as u32, code));
            }
        }
        ac.other.sort_unstable();
        let max_code = by_freq.len() as u32;

        let mut keys: Vec<(Vec<u32>, u32)> = words
            .into_iter()
            .map(|(w, id)| (w.iter().map(|&c| ac.code(c)).collect(), id))
            .collect();
        keys.sort_unstable();
        ac.place(&keys, max_code)?;
        Some(ac)
    }

    fn code_slot(&mut self, c: char) -> Option<&mut u32> {
        let c = c as u32;
        if c < 128 {
            self.ascii.get_mut(c as usize)
        } else {
            self.cjk.get_mut(c.wrapping_sub(CJK_FIRST) as usize)
        }
    }

    /// The code of `c`, 0 if no word has it.
    #[inline(always)]
    fn code(&self, c: char) -> u32 {
        let c = c as u32;
        let i = c.wrapping_sub(CJK_FIRST) as usize;
        if i < CJK_LEN {
            self.cjk[i]
        } else if c < 128 {
            self.ascii[c as usize]
        } else {
            self.other
                .binary_search_by_key(&c, |&(ch, _)| ch)
                .map_or(0, |i| self.other[i].1)
        }
    }

    /// Lay out the trie of the sorted `keys` breadth first, with failure links and outputs.
    fn place(&mut self, keys: &[(Vec<u32>, u32)], max_code: u32) -> Option<()> {
        let span = max_code as usize + 1;
        let mut units = vec![
            Unit {
                base: 0,
                check: EMPTY,
                fail: ROOT,
                out: 0
            };
            span + 1
        ];
        // Cell 0 is the root. `free.find(i)`: the first free cell from `i` on.
        let mut free = FreeCells::new(span + 1);
        free.take(0);
        let mut outputs: Vec<u32> = Vec::new();
        // (state, first key, end key, depth): the keys in `first..end` all pass through `state`.
        let mut queue = std::collections::VecDeque::new();
        queue.push_back((ROOT, 0usize, keys.len(), 0usize));
        let mut children: Vec<(u32, usize, usize)> = Vec::new();
        const WINDOW: usize = 1 << 14;
        let mut top_used = 0usize;
        while let Some((state, mut lo, hi, depth)) = queue.pop_front() {
            // A key ending here is first (a prefix sorts before its extensions).
            if lo < hi && keys[lo].0.len() == depth {
                lo += 1;
            }
            children.clear();
            let mut i = lo;
            while i < hi {
                let c = keys[i].0[depth];
                let mut j = i + 1;
                while j < hi && keys[j].0[depth] == c {
                    j += 1;
                }
                children.push((c, i, j));
                i = j;
            }
            if children.is_empty() {
                continue;
            }
            // First fit: the first free cell that can take the first child and leaves the
            // others' cells free.
            // States with several children search only the last `WINDOW` cells: older holes
            // rarely fit them, and scanning them all made building quadratic.
            let first = children[0].0 as usize;
            let from = if children.len() > 1 {
                top_used.saturating_sub(WINDOW)
            } else {
                0
            };
            let mut pos = free.find((first + 1).max(from));
            let base = loop {
                let b = pos - first;
                if children[1..].iter().all(|&(c, _, _)| free.is_free(b + c as usize)) {
                    break b;
                }
                pos = free.find(pos + 1);
            };
            top_used = top_used.max(base + children[children.len() - 1].0 as usize);
            let top = base + span;
            free.ensure(top + 1);
            if top >= units.len() {
                units.resize(
                    top + 1,
                    Unit {
                        base: 0,
                        check: EMPTY,
                        fail: ROOT,
                        out: 0,
                    },
                );
            }
            units[state as usize].base = u32::try_from(base).ok()?;
            for &(c, _, _) in &children {
                let t = base + c as usize;
                free.take(t);
                units[t].check = state;
            }
            for &(c, i, j) in &children {
                let t = (base + c as usize) as u32;
                // Failure state: the longest proper suffix of the child's string that is a state.
                let fail = if state == ROOT {
                    ROOT
                } else {
                    let mut f = units[state as usize].fail;
                    loop {
                        let g = units[f as usize].base as usize + c as usize;
                        if units.get(g).is_some_and(|u| u.check == f) {
                            break g as u32;
                        }
                        if f == ROOT {
                            break ROOT;
                        }
                        f = units[f as usize].fail;
                    }
                };
                let inherited = units[fail as usize].out;
                let ends_word = keys[i].0.len() == depth + 1;
                let out = if ends_word {
                    let start = outputs.len();
                    let (from, count) = (
                        (inherited >> COUNT_BITS) as usize,
                        (inherited & ((1 << COUNT_BITS) - 1)) as usize,
                    );
                    outputs.extend_from_within(from..from + count);
                    outputs.push((keys[i].1 << LEN_BITS) | (depth as u32 + 1));
                    if count + 1 >= 1 << COUNT_BITS || start >= 1 << (32 - COUNT_BITS) {
                        return None;
                    }
                    ((start as u32) << COUNT_BITS) | (count as u32 + 1)
                } else {
                    inherited
                };
                units[t as usize].fail = fail;
                units[t as usize].out = out;
                queue.push_back((t, i, j, depth + 1));
            }
        }
        if outputs.len() >= 1 << (32 - COUNT_BITS) {
            return None;
        }
        self.units = units;
        self.outputs = outputs;
        Some(())
    }

    pub(crate) const START: u32 = ROOT;

    /// The state after reading `ch` in `state`.
    #[inline(always)]
    pub(crate) fn step(&self, mut state: u32, ch: char) -> u32 {
        let code = self.code(ch);
        if code == 0 {
            return ROOT;
        }
        for _ in 0..MAX_FAIL_STEPS {
            let unit = &self.units[state as usize];
            let t = unit.base.wrapping_add(code);
            if self.units.get(t as usize).is_some_and(|u| u.check == state) {
                return t;
            }
            if state == ROOT {
                return ROOT;
            }
            state = unit.fail;
        }
        ROOT
    }

    /// The words that start at the character just read into `state`: `(word id << 6) | length
    /// in characters`, shortest first.
    #[inline(always)]
    pub(crate) fn outputs(&self, state: u32) -> &[u32] {
        let out = self.units[state as usize].out;
        let start = (out >> COUNT_BITS) as usize;
        let len = (out & ((1 << COUNT_BITS) - 1)) as usize;
        self.outputs.get(start..start + len).unwrap_or(&[])
    }

    /// Length in characters and word id of an output entry.
    #[inline(always)]
    pub(crate) fn entry(e: u32) -> (usize, i32) {
        ((e & ((1 << LEN_BITS) - 1)) as usize, (e >> LEN_BITS) as i32)
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.cjk.len() * 4
            + self.ascii.len() * 4
            + self.other.len() * 8
            + self.units.len() * std::mem::size_of::<Unit>()
            + self.outputs.len() * 4
    }

    pub(crate) fn write_snapshot(&self, w: &mut Writer<'_>) {
        for table in [&self.cjk, &self.ascii] {
            w.u64(table.len() as u64);
            for &c in table {
                w.u32(c);
            }
        }
        w.u64(self.other.len() as u64);
        for &(c, code) in &self.other {
            w.u32(c);
            w.u32(code);
        }
        w.u64(self.units.len() as u64);
        for u in &self.units {
            w.u32(u.base);
            w.u32(u.check);
            w.u32(u.fail);
            w.u32(u.out);
        }
        w.u64(self.outputs.len() as u64);
        for &o in &self.outputs {
            w.u32(o);
        }
    }

    /// Reads an automaton back, checking everything `step`, `outputs` and the route rely on:
    /// table sizes, every code's transitions inside the unit table, failure states strictly
    /// shallower than their state, output slices inside the output table, and output words
    /// with ids below `words` and no longer than their state is deep (so a word found never
    /// reaches past the block's end).
    pub(crate) fn read_snapshot(r: &mut Reader<'_>, words: usize) -> Result<Automaton, Error> {
        let bad = |what: &str| Error::InvalidDictEntry(format!("dictionary snapshot: automaton {what}"));
        let mut table = |r: &mut Reader<'_>, len: usize| -> Result<Vec<u32>, Error> {
            if r.count(4)? != len {
                return Err(bad("code table size"));
            }
            (0..len).map(|_| r.u32()).collect()
        };
        let cjk = table(r, CJK_LEN)?;
        let ascii = table(r, 128)?;
        let n = r.count(8)?;
        let mut other = Vec::with_capacity(n);
        for _ in 0..n {
            other.push((r.u32()?, r.u32()?));
        }
        if other.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(bad("codes not sorted"));
        }
        let max_code = cjk
            .iter()
            .chain(&ascii)
            .copied()
            .chain(other.iter().map(|&(_, c)| c))
            .max()
            .unwrap_or(0) as usize;
        let n = r.count(16)?;
        let mut units = Vec::with_capacity(n);
        for _ in 0..n {
            units.push(Unit {
                base: r.u32()?,
                check: r.u32()?,
                fail: r.u32()?,
                out: r.u32()?,
            });
        }
        let n = r.count(4)?;
        let outputs = (0..n).map(|_| r.u32()).collect::<Result<Vec<u32>, Error>>()?;

        if units.is_empty() || units[0].check != EMPTY {
            return Err(bad("root"));
        }
        // Depth of every state through its parents (`check`), at most MAX_LEN.
        const UNKNOWN: u8 = u8::MAX;
        let mut depth = vec![UNKNOWN; units.len()];
        depth[0] = 0;
        let mut path = Vec::new();
        for s in 0..units.len() {
            if units[s].check == EMPTY && s != 0 {
                continue;
            }
            path.clear();
            let mut t = s;
            while depth[t] == UNKNOWN {
                path.push(t);
                if path.len() > MAX_LEN {
                    return Err(bad("too deep"));
                }
                let parent = units[t].check as usize;
                if parent >= units.len() || (units[parent].check == EMPTY && parent != 0) {
                    return Err(bad("parent"));
                }
                t = parent;
            }
            let mut d = depth[t];
            for &p in path.iter().rev() {
                d += 1;
                if d as usize > MAX_LEN {
                    return Err(bad("too deep"));
                }
                depth[p] = d;
            }
        }
        for (s, u) in units.iter().enumerate() {
            if depth[s] == UNKNOWN {
                continue;
            }
            // A state's transitions reach at most base + max_code; its parent's transition to it
            // must be base + code, which the parent check above and this bound keep in the table.
            if u.base as usize + max_code >= units.len() {
                return Err(bad("base"));
            }
            let fail = u.fail as usize;
            if fail >= units.len() || depth[fail] == UNKNOWN || (s != 0 && depth[fail] >= depth[s]) {
                return Err(bad("failure state"));
            }
            let start = (u.out >> COUNT_BITS) as usize;
            let count = (u.out & ((1 << COUNT_BITS) - 1)) as usize;
            let Some(slice) = outputs.get(start..start + count) else {
                return Err(bad("outputs"));
            };
            for &e in slice {
                let (len, id) = Self::entry(e);
                if len == 0 || len > depth[s] as usize || id as usize >= words {
                    return Err(bad("output word"));
                }
            }
        }
        Ok(Automaton {
            cjk,
            ascii,
            other,
            units,
            outputs,
        })
    }
}

/// Which cells of the array under construction are free, with the next free cell from any
/// position found in near-constant time (a union-find over runs of taken cells).
struct FreeCells {
    /// For a taken cell, a cell at or before the next free one; a free cell points to itself.
    next: Vec<u32>,
}

impl FreeCells {
    fn new(len: usize) -> Self {
        FreeCells {
            next: (0..len as u32).collect(),
        }
    }

    fn ensure(&mut self, len: usize) {
        let from = self.next.len() as u32;
        if len > self.next.len() {
            self.next.extend(from..len as u32);
        }
    }

    fn is_free(&self, i: usize) -> bool {
        self.next.get(i).is_none_or(|&n| n as usize == i)
    }

    fn take(&mut self, i: usize) {
        self.ensure(i + 2);
        self.next[i] = i as u32 + 1;
    }

    fn find(&mut self, i: usize) -> usize {
        self.ensure(i + 1);
        let mut root = i;
        while self.next[root] as usize != root {
            root = self.next[root] as usize;
            if root >= self.next.len() {
                self.ensure(root + 1);
            }
        }
        let mut j = i;
        while self.next[j] as usize != root && j != root {
            let n = self.next[j] as usize;
            self.next[j] = root as u32;
            j = n;
        }
        root
    }
}
