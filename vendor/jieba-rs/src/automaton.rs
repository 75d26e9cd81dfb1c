//! [newsdedup addition] The dictionary as a character-level double-array Aho-Corasick automaton
//! over the *reversed* words, so that one right-to-left pass over a block finds, at every
//! character, every dictionary word that starts there.
//!
//! `cut` needs, for each character of a block, the ends of the dictionary words starting at it
//! (jieba's DAG) and consumes them from the last character to the first (the route). The trie
//! walk finds them by walking afresh from every character, a chain of dependent loads per
//! position. Read right to left, the automaton takes one transition per character (plus the
//! failure steps), and its state there lists, shortest first, the words starting at that
//! character: the same edges in the same order as the walk's.
//!
//! Layout: characters are mapped to dense codes (heaviest in the dictionary first); state `s`
//! has a transition on code `c` to `t = base[s] + c` iff `check[t] == s`. Each state's cell also
//! holds its failure state (and that state's `base`) and a slice of `outputs`: log frequency and
//! `(word id << 6) | length in characters` of every dictionary word that is a prefix of the text
//! read from that character, ascending by length. States are laid out heaviest first (by the
//! summed frequency of the words through them), so common text stays in few cache lines. Only
//! words made entirely of characters that can appear in a dictionary block (`is_han_default`)
//! are kept: no other word can match there.

use crate::errors::Error;
use crate::snapshot::{Reader, Writer};
use crate::trie::CharTrie;

const ROOT: u32 = 0;
/// `check` of a cell that is not a state (and of the root, which has no parent).
const EMPTY: u32 = (1 << 21) - 1;
/// Output entries pack the word's length in characters in the low bits.
const LEN_BITS: u32 = 6;
const MAX_LEN: usize = (1 << LEN_BITS) - 1;
/// A state's output slice packs its length in the low bits of `out`.
const COUNT_BITS: u32 = 6;
/// Failure steps taken for one character at most; more than any valid automaton (whose states are
/// at most `MAX_LEN` deep) needs, so a damaged one cannot loop.
const MAX_FAIL_STEPS: usize = MAX_LEN + 1;

/// Characters of the Basic Multilingual Plane are coded by a table (128 KB), the others by a
/// search.
const BMP_LEN: usize = 0x1_0000;

/// A word an output slice lists: its log frequency (a copy of `Jieba::log_freqs`, which the
/// route reads with it) and `(word id << 6) | length in characters`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Output {
    pub(crate) log_freq: f64,
    word: u32,
}

/// Cell indices (states, bases, failure states) have 21 bits, so that a cell packs into 16
/// bytes: a dictionary needing more cells is left to the trie walk.
const IDX_BITS: u32 = 21;
const IDX_MASK: u64 = (1 << IDX_BITS) - 1;

/// A cell of the double array, packed into 16 bytes: the transitions of the state there (`base`,
/// and `check`, its parent), its failure state, the failure state's `base` and whether that
/// one's failure state is not the root (`deep`), and its output slice. A transition's check
/// brings the whole cell into cache, so the next step reads the transitions from the state and
/// from its failure state at once, and the output slice with no further load.
#[derive(Clone, Copy)]
struct Cell {
    /// `base | check << 21 | fail << 42 | deep << 63`.
    lo: u64,
    /// `fail_base | out << 32`.
    hi: u64,
}

impl Cell {
    fn pack(u: &Unit, fail_base: u32, deep: bool) -> Cell {
        Cell {
            lo: u.base as u64 | (u.check as u64) << IDX_BITS | (u.fail as u64) << (2 * IDX_BITS) | (deep as u64) << 63,
            hi: fail_base as u64 | (u.out as u64) << 32,
        }
    }
    #[inline(always)]
    fn base(self) -> u32 {
        (self.lo & IDX_MASK) as u32
    }
    #[inline(always)]
    fn check(self) -> u32 {
        ((self.lo >> IDX_BITS) & IDX_MASK) as u32
    }
    #[inline(always)]
    fn fail(self) -> u32 {
        ((self.lo >> (2 * IDX_BITS)) & IDX_MASK) as u32
    }
    #[inline(always)]
    fn deep(self) -> bool {
        self.lo >> 63 != 0
    }
    #[inline(always)]
    fn fail_base(self) -> u32 {
        self.hi as u32
    }
    #[inline(always)]
    fn out(self) -> u32 {
        (self.hi >> 32) as u32
    }
}

/// A cell while the automaton is built: its `Cell` and output slice.
#[derive(Clone, Copy)]
struct Unit {
    base: u32,
    check: u32,
    fail: u32,
    out: u32,
}

#[derive(Clone)]
pub(crate) struct Automaton {
    /// Code of each BMP character, 0 for none.
    bmp: Vec<u16>,
    /// Codes of other characters, sorted by character.
    other: Vec<(u32, u32)>,
    cells: Vec<Cell>,
    outputs: Vec<Output>,
}

impl std::fmt::Debug for Automaton {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Automaton")
            .field("cells", &self.cells.len())
            .field("states", &self.cells.iter().filter(|u| u.check() != EMPTY).count())
            .field("outputs", &self.outputs.len())
            .finish()
    }
}

impl Automaton {
    /// The automaton of the words in `trie` (`freqs` and `log_freqs` by word id), or `None` if
    /// it does not fit the layout (a word of more than 63 characters, more than 2^26 words or
    /// outputs), when the caller keeps using the trie walk.
    pub(crate) fn build(trie: &CharTrie, freqs: &[usize], log_freqs: &[f64]) -> Option<Automaton> {
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
            let id = u32::try_from(word_id).ok()?;
            if id as usize >= freqs.len() || id as usize >= log_freqs.len() {
                return None;
            }
            words.push((word, id));
        }
        if words.len() >= 1 << (32 - LEN_BITS) {
            return None;
        }
        // How often a word is used: its dictionary frequency, plus one so none weighs nothing.
        let weight = |id: u32| freqs[id as usize] as u64 + 1;

        // Codes: the characters by the summed weight of the words they occur in, heaviest first,
        // so that the common words' states sit close together.
        let mut char_weight: rustc_hash::FxHashMap<char, u64> = Default::default();
        for (w, id) in &words {
            for &c in w {
                *char_weight.entry(c).or_default() += weight(*id);
            }
        }
        let mut by_weight: Vec<(char, u64)> = char_weight.into_iter().collect();
        by_weight.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut ac = Automaton {
            bmp: vec![0; BMP_LEN],
            other: Vec::new(),
            cells: Vec::new(),
            outputs: Vec::new(),
        };
        if by_weight.len() >= 1 << 16 {
            return None;
        }
        for (i, &(c, _)) in by_weight.iter().enumerate() {
            let code = i as u32 + 1;
            match ac.bmp.get_mut(c as usize) {
                Some(slot) => *slot = code as u16,
                None => ac.other.push((c as u32, code)),
            }
        }
        ac.other.sort_unstable();
        let max_code = by_weight.len() as u32;

        let mut keys: Vec<(Vec<u32>, u32)> = words
            .into_iter()
            .map(|(w, id)| (w.iter().map(|&c| ac.code(c)).collect(), id))
            .collect();
        keys.sort_unstable();
        let trie = KeyTrie::new(&keys, &weight);
        ac.place(&trie, max_code, log_freqs)?;
        Some(ac)
    }

    /// The code of `c`, 0 if no word has it.
    #[inline(always)]
    fn code(&self, c: char) -> u32 {
        let c = c as u32;
        if let Some(&code) = self.bmp.get(c as usize) {
            code as u32
        } else {
            self.other
                .binary_search_by_key(&c, |&(ch, _)| ch)
                .map_or(0, |i| self.other[i].1)
        }
    }

    /// Lay `trie` out as a double array, the heaviest states first (each state's children get
    /// the first cells that fit when it is placed, and a state weighs more than its children),
    /// so that the states common text goes through share few cache lines; their output slices
    /// likewise.
    fn place(&mut self, trie: &KeyTrie, max_code: u32, log_freqs: &[f64]) -> Option<()> {
        let span = max_code as usize + 1;
        let n = trie.nodes.len();
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(trie.nodes[i as usize].weight), i));

        let empty = Unit {
            base: 0,
            check: EMPTY,
            fail: ROOT,
            out: 0,
        };
        let mut units = vec![empty; span + 1];
        let mut cell = vec![u32::MAX; n];
        cell[0] = ROOT;
        let mut free = FreeCells::new(span + 1);
        free.take(0);
        // States with several children search only the last `WINDOW` cells: older holes rarely
        // fit them, and scanning them all made building quadratic.
        const WINDOW: usize = 1 << 16;
        const MAX_TRIES: usize = usize::MAX;
        let mut top_used = 0usize;
        for &i in &order {
            let node = &trie.nodes[i as usize];
            let children = &trie.nodes[node.children.0 as usize..node.children.1 as usize];
            let Some(first) = children.first() else {
                continue;
            };
            let first = first.code as usize;
            let from = if children.len() > 1 {
                top_used.saturating_sub(WINDOW)
            } else {
                0
            };
            let mut pos = free.find((first + 1).max(from));
            let mut tries = 0;
            let base = loop {
                let b = pos - first;
                if children[1..].iter().all(|c| free.is_free(b + c.code as usize)) {
                    break b;
                }
                // After many misfits, go past every cell taken so far, where all are free.
                tries += 1;
                pos = if tries == MAX_TRIES {
                    free.find(top_used + 1 + first)
                } else {
                    free.find(pos + 1)
                };
            };
            let top = base + span;
            free.ensure(top + 1);
            if top >= units.len() {
                units.resize(top + 1, empty);
            }
            let here = cell[i as usize] as usize;
            units[here].base = u32::try_from(base).ok()?;
            for (k, c) in children.iter().enumerate() {
                let t = base + c.code as usize;
                free.take(t);
                top_used = top_used.max(t);
                units[t].check = here as u32;
                cell[node.children.0 as usize + k] = t as u32;
            }
        }
        // Output slices in the same order, a slice shared by the states that have it.
        let mut outputs: Vec<Output> = Vec::new();
        let mut moved = vec![u32::MAX; trie.outputs.len() + 1];
        for &i in &order {
            let node = &trie.nodes[i as usize];
            let (start, count) = node.out;
            let t = cell[i as usize] as usize;
            units[t].fail = cell[node.fail as usize];
            if count == 0 {
                continue;
            }
            if moved[start as usize] == u32::MAX {
                moved[start as usize] = outputs.len() as u32;
                for &word in &trie.outputs[start as usize..(start + count) as usize] {
                    let log_freq = *log_freqs.get((word >> LEN_BITS) as usize)?;
                    outputs.push(Output { log_freq, word });
                }
            }
            let new_start = moved[start as usize];
            if count as usize >= 1 << COUNT_BITS || new_start as usize >= 1 << (32 - COUNT_BITS) {
                return None;
            }
            units[t].out = (new_start << COUNT_BITS) | count;
        }
        if units.len() >= EMPTY as usize {
            return None;
        }
        self.cells = Vec::with_capacity(units.len());
        for u in &units {
            let f = units.get(u.fail as usize)?;
            self.cells.push(Cell::pack(u, f.base, u.fail != ROOT && f.fail != ROOT));
        }
        self.outputs = outputs;
        Some(())
    }

    pub(crate) const START: u32 = ROOT;

    /// The state after reading `ch` in `state`.
    ///
    /// The transitions from `state`, from its failure state (whose `base` the state's cell
    /// holds) and from the root are read at once, not one after the other, and the first that
    /// exists is taken; only a state whose failure chain is longer goes round the loop. (Forcing
    /// the choice into conditional moves, `select_unpredictable`, was much slower: vendored /
    /// crates.io `cut` 0.80-0.90 against 1.17-1.30; with branches the processor goes on with the
    /// likely transition before the others' loads arrive.)
    #[inline(always)]
    pub(crate) fn step(&self, state: u32, ch: char) -> u32 {
        let code = self.code(ch);
        let cells = &self.cells;
        let here = cells[state as usize];
        let t1 = here.base().wrapping_add(code);
        let f = here.fail();
        let t2 = here.fail_base().wrapping_add(code);
        let t3 = cells[ROOT as usize].base().wrapping_add(code);
        // Code 0 has no transition anywhere: no state has a child in its base cell.
        let ok1 = cells[t1 as usize].check() == state;
        let ok2 = cells[t2 as usize].check() == f;
        let ok3 = cells[t3 as usize].check() == ROOT;
        if !ok1 && !ok2 && here.deep() && code != 0 {
            return self.step_slow(cells[f as usize].fail(), code);
        }
        let r3 = if ok3 { t3 } else { ROOT };
        let r2 = if ok2 { t2 } else { r3 };
        if ok1 { t1 } else { r2 }
    }

    /// The state after reading code `code` in `state`, following failure states as long as
    /// needed.
    #[cold]
    fn step_slow(&self, mut state: u32, code: u32) -> u32 {
        for _ in 0..MAX_FAIL_STEPS {
            let t = self.cells[state as usize].base().wrapping_add(code);
            if self.cells.get(t as usize).is_some_and(|u| u.check() == state) {
                return t;
            }
            if state == ROOT {
                return ROOT;
            }
            state = self.cells[state as usize].fail();
        }
        ROOT
    }

    /// Leave in `states[i]` the output slice (see `outputs`) of the state after reading `chars`
    /// from the end back to character `i`, with the state reset at every character no word has
    /// (so a dictionary block, whose neighbours are such characters, is read as if alone).
    ///
    /// A pass of its own: reading the states and consuming them in the route in one loop was
    /// slower (vendored / crates.io `cut` 1.04-1.10 against 1.19-1.29, same machine and run).
    /// Reading four stretches of the sentence in turn, so that their chains of loads overlap,
    /// gained nothing either (the step has no branch on a loaded value for them to wait on).
    pub(crate) fn states(&self, chars: &[(u32, char)], states: &mut Vec<u32>) {
        states.clear();
        states.resize(chars.len(), 0);
        let mut state = ROOT;
        for (&(_, ch), out) in chars.iter().zip(states.iter_mut()).rev() {
            state = self.step(state, ch);
            *out = self.cells[state as usize].out();
        }
    }

    /// The words that start at a character whose state's output slice is `out` (what `states`
    /// leaves), shortest first.
    #[inline(always)]
    pub(crate) fn outputs(&self, out: u32) -> &[Output] {
        let start = (out >> COUNT_BITS) as usize;
        let len = (out & ((1 << COUNT_BITS) - 1)) as usize;
        self.outputs.get(start..start + len).unwrap_or(&[])
    }

    /// Length in characters and word id of an output.
    #[inline(always)]
    pub(crate) fn entry(o: &Output) -> (usize, i32) {
        ((o.word & ((1 << LEN_BITS) - 1)) as usize, (o.word >> LEN_BITS) as i32)
    }

    /// Set the log frequency of word `id` wherever it is listed (after `Jieba::add_word`
    /// changed the frequency of a word the dictionary has).
    pub(crate) fn set_log_freq(&mut self, id: u32, log_freq: f64) {
        for o in &mut self.outputs {
            if o.word >> LEN_BITS == id {
                o.log_freq = log_freq;
            }
        }
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.bmp.len() * 2
            + self.other.len() * 8
            + self.cells.len() * std::mem::size_of::<Cell>()
            + self.outputs.len() * std::mem::size_of::<Output>()
    }

    pub(crate) fn write_snapshot(&self, w: &mut Writer<'_>) {
        w.u64(self.bmp.len() as u64);
        for &c in &self.bmp {
            w.u32(c as u32);
        }
        w.u64(self.other.len() as u64);
        for &(c, code) in &self.other {
            w.u32(c);
            w.u32(code);
        }
        w.u64(self.cells.len() as u64);
        for c in &self.cells {
            w.u64(c.lo);
            w.u64(c.hi);
        }
        w.u64(self.outputs.len() as u64);
        for o in &self.outputs {
            w.u32(o.word);
        }
    }

    /// Reads an automaton back, checking every index `step`, `outputs` and the route rely on:
    /// table sizes, every state's transitions (from it, and from its failure state through
    /// `fail_base`) inside the cell table, failure states and parents inside it, output slices
    /// inside the output table, and output words with ids below `log_freqs.len()` and lengths of
    /// 1 to 63 characters. So a damaged image is refused or loads into a segmenter that cannot
    /// panic; it may segment wrongly (the structure is not re-derived: that took ~100 ms of random
    /// reads at start-up), so an image must be the writer's bytes (newsdedup checksums its
    /// start-up image). The log frequencies are taken from `log_freqs`.
    pub(crate) fn read_snapshot(r: &mut Reader<'_>, log_freqs: &[f64]) -> Result<Automaton, Error> {
        let bad = |what: &str| Error::InvalidDictEntry(format!("dictionary snapshot: automaton {what}"));
        if r.count(4)? != BMP_LEN {
            return Err(bad("code table size"));
        }
        let mut bmp = Vec::with_capacity(BMP_LEN);
        for _ in 0..BMP_LEN {
            bmp.push(u16::try_from(r.u32()?).map_err(|_| bad("code"))?);
        }
        let n = r.count(8)?;
        let mut other = Vec::with_capacity(n);
        for _ in 0..n {
            other.push((r.u32()?, r.u32()?));
        }
        if other.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(bad("codes not sorted"));
        }
        let max_code = bmp
            .iter()
            .map(|&c| c as u32)
            .chain(other.iter().map(|&(_, c)| c))
            .max()
            .unwrap_or(0) as usize;
        // Read in bulk: these are most of the image.
        let u64_at = |b: &[u8], at: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(a)
        };
        let n = r.count(16)?;
        if n >= EMPTY as usize {
            return Err(bad("size"));
        }
        let cells: Vec<Cell> = r
            .take(n * 16)?
            .chunks_exact(16)
            .map(|c| Cell {
                lo: u64_at(c, 0),
                hi: u64_at(c, 8),
            })
            .collect();
        let n = r.count(4)?;
        let mut outputs = Vec::with_capacity(n);
        for c in r.take(n * 4)?.chunks_exact(4) {
            let word = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let Some(&log_freq) = log_freqs.get((word >> LEN_BITS) as usize) else {
                return Err(bad("output word"));
            };
            if word & ((1 << LEN_BITS) - 1) == 0 {
                return Err(bad("output length"));
            }
            outputs.push(Output { log_freq, word });
        }

        if cells.is_empty() || cells[0].check() != EMPTY {
            return Err(bad("root"));
        }
        let len = cells.len();
        for c in &cells {
            let index_ok = |i: u32| (i as usize) < len;
            if c.base() as usize + max_code >= len
                || c.fail_base() as usize + max_code >= len
                || !index_ok(c.fail())
                || !(index_ok(c.check()) || c.check() == EMPTY)
            {
                return Err(bad("cell"));
            }
            let start = (c.out() >> COUNT_BITS) as usize;
            let count = (c.out() & ((1 << COUNT_BITS) - 1)) as usize;
            if start + count > outputs.len() {
                return Err(bad("outputs"));
            }
        }
        Ok(Automaton {
            bmp,
            other,
            cells,
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

/// The trie of the sorted reversed words as nodes in breadth-first order, with failure links,
/// outputs and weights: what `Automaton::place` lays out.
struct KeyTrie {
    nodes: Vec<KeyNode>,
    /// Output slices, as in `Automaton::outputs`.
    outputs: Vec<u32>,
}

struct KeyNode {
    code: u32,
    /// Children: `nodes[children.0..children.1]`, by code.
    children: (u32, u32),
    fail: u32,
    /// Start and length of the node's slice of `outputs`.
    out: (u32, u32),
    /// Summed weight of the words through this node.
    weight: u64,
}

impl KeyTrie {
    fn new(keys: &[(Vec<u32>, u32)], weight: &impl Fn(u32) -> u64) -> KeyTrie {
        let mut nodes = vec![KeyNode {
            code: 0,
            children: (0, 0),
            fail: 0,
            out: (0, 0),
            weight: 0,
        }];
        let mut parent = vec![0u32];
        let mut outputs = Vec::new();
        // Key range and depth of each node.
        let mut ranges = vec![(0usize, keys.len(), 0usize)];
        let mut i = 0;
        while i < nodes.len() {
            let (mut lo, hi, depth) = ranges[i];
            if lo < hi && keys[lo].0.len() == depth {
                nodes[i].weight += weight(keys[lo].1);
                lo += 1;
            }
            let first = nodes.len() as u32;
            while lo < hi {
                let c = keys[lo].0[depth];
                let mut j = lo + 1;
                while j < hi && keys[j].0[depth] == c {
                    j += 1;
                }
                let child = nodes.len() as u32;
                // Failure state: the longest proper suffix of the child's string that is a node
                // (nodes of smaller depth, all numbered before this one, have their children).
                let fail = if i == 0 {
                    0
                } else {
                    let mut f = nodes[i].fail;
                    loop {
                        let (a, b) = nodes[f as usize].children;
                        let found = nodes[a as usize..b as usize].binary_search_by_key(&c, |n| n.code).ok();
                        if let Some(k) = found {
                            break a + k as u32;
                        }
                        if f == 0 {
                            break 0;
                        }
                        f = nodes[f as usize].fail;
                    }
                };
                let inherited = nodes[fail as usize].out;
                let out = if keys[lo].0.len() == depth + 1 {
                    let start = outputs.len() as u32;
                    outputs.extend_from_within(inherited.0 as usize..(inherited.0 + inherited.1) as usize);
                    outputs.push((keys[lo].1 << LEN_BITS) | (depth as u32 + 1));
                    (start, inherited.1 + 1)
                } else {
                    inherited
                };
                nodes.push(KeyNode {
                    code: c,
                    children: (0, 0),
                    fail,
                    out,
                    weight: 1,
                });
                parent.push(i as u32);
                ranges.push((lo, j, depth + 1));
                let _ = child;
                lo = j;
            }
            nodes[i].children = (first, nodes.len() as u32);
            i += 1;
        }
        // Children come after their parent: sum the weights from the last node back.
        for i in (1..nodes.len()).rev() {
            let w = nodes[i].weight;
            nodes[parent[i] as usize].weight += w;
        }
        KeyTrie { nodes, outputs }
    }
}
