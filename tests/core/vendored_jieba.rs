//! The vendored jieba-rs (vendor/jieba-rs: its trie walk prefetches, and on request, `cut` reads
//! each sentence with a dictionary automaton in one pass instead of walking the trie from every
//! character) segments exactly like the crates.io release it was copied from, either way.
//! Fingerprints depend on every token, so any difference would silently change them. Every
//! comparison checks each token's word, character span and byte span, with the HMM on and off.

use crate::common;

use std::collections::HashSet;

const DICT: &str = include_str!("../../config/jieba_dict.txt");

/// Texts that exercise the walk's edges: words at the end of a block, lookahead past the end,
/// non-BMP characters, mixed scripts, HMM runs, ASCII runs, empty and one-character blocks.
const TRICKY: &[&str] = &[
    "",
    "中",
    "中国",
    "中华人民共和国",
    "王小明和李华去了北京大学参加马拉松比赛，冠军是张三丰。",
    "iPhone 15 Pro和5G网络、A股3.5%的涨幅，NBA总决赛",
    "𠀀𠀁中国𦡦𦡦人民𪚥",
    "綜合報導：台灣新北市今天舉行記者會，市長表示將推動新政策。",
    "的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的的",
    "abc\r\ndef\n\n\t  中文 English 混合 text，标点！？……——“”《》",
    "南京市长江大桥欢迎您我们中出了一个叛徒结婚的和尚未结婚的",
    // Traditional text, and Latin letters and digits inside and between dictionary blocks.
    "鄧小平與中華民國總統會晤後發表聯合聲明，臺灣與香港媒體廣泛報導。",
    "2024年Q3财报显示GDP增长5.2%，iPhone15ProMax售价8999元，4S店和1号店、C++与C#、U.S.A.",
    "COVID-19疫情期间，WHO宣布H1N1和SARS-CoV-2……3.14159e10 0x1F A股B股ETF50",
    "ａｂｃ１２３全角字母与数字，半角abc123混排；第1000000名、12点30分、百分之99.9",
    // Runs the automaton splits a long sentence at, and a block longer than any word.
    "中华人民共和国中央人民政府今天成立了中华人民共和国中央人民政府今天成立了中华人民共和国中央人民政府今天成立了中华人民共和国中央人民政府今天成立了",
    "一二三四五六七八九十百千万亿兆京垓秭穰沟涧正载极恒河沙阿僧祇那由他不可思议无量大数",
    "\u{3400}\u{4DB5}\u{F900}\u{FA6D}\u{2A700}\u{2B740}\u{2B820}\u{2CEB0}\u{2F800}",
];

/// Every token of `cut` as (word, character span, byte span), so that a token with the right
/// word in the wrong place is a difference too.
type Tok<'a> = (&'a str, usize, usize, usize, usize);

/// The vendored dictionary `dict` with the automaton `cut` reads sentences with in one pass.
fn with_automaton(dict: &str) -> jieba_rs::Jieba {
    let mut j = jieba_rs::Jieba::with_dict(&mut dict.as_bytes()).unwrap();
    j.build_automaton();
    assert!(j.automaton_bytes().is_some());
    j
}

fn cut_both(vendored: &jieba_rs::Jieba, upstream: &jieba_rs_upstream::Jieba, text: &str) {
    cut_many(&[vendored], upstream, text);
}

/// `cut_both` for several vendored instances, cutting with upstream once.
fn cut_many(vendored: &[&jieba_rs::Jieba], upstream: &jieba_rs_upstream::Jieba, text: &str) {
    for hmm in [true, false] {
        let want: Vec<Tok> = upstream
            .cut(text, hmm)
            .iter()
            .map(|t| (t.word, t.start, t.end, t.byte_start, t.byte_end))
            .collect();
        for vendored in vendored {
            cut_vendored(vendored, &want, text, hmm);
        }
    }
}

fn cut_vendored(vendored: &jieba_rs::Jieba, want: &[Tok], text: &str, hmm: bool) {
    {
        let got: Vec<Tok> = vendored
            .cut(text, hmm)
            .iter()
            .map(|t| (t.word, t.start, t.end, t.byte_start, t.byte_end))
            .collect();
        assert_eq!(
            got,
            want,
            "hmm={hmm}, automaton={}: {text}",
            vendored.automaton_bytes().is_some()
        );
        // The ids `cut_with_ids` hands out are the words' dictionary ids, and its words are
        // `cut`'s.
        let mut words = Vec::new();
        vendored.cut_with_ids(text, hmm, |word, id| {
            if let Some(id) = id {
                assert_eq!(vendored.word_id(word), Some(id), "{word}");
            }
            words.push(word);
        });
        let cut_words: Vec<&str> = got.iter().map(|&(w, ..)| w).collect();
        assert_eq!(words, cut_words, "hmm={hmm}: {text}");
    }
}

/// `cut_both`, and the same with the automaton dropped (the trie walk `cut` falls back to), and
/// the texts joined into one sentence (so that the automaton's lanes split it).
fn cut_all_ways(vendored: &jieba_rs::Jieba, upstream: &jieba_rs_upstream::Jieba, texts: &[&str]) {
    assert!(
        vendored.automaton_bytes().is_some(),
        "the dictionary was loaded, so `cut` reads it with the automaton"
    );
    let mut walking = vendored.clone();
    // Adding a word the dictionary has (same frequency) keeps the automaton; a new one drops it.
    walking.add_word("一个不在词典里的词", Some(1), None);
    assert!(walking.automaton_bytes().is_none());
    let mut upstream_too = upstream.clone();
    upstream_too.add_word("一个不在词典里的词", Some(1), None);
    for text in texts {
        cut_both(vendored, upstream, text);
        cut_both(&walking, &upstream_too, text);
    }
    let joined = texts.concat();
    cut_both(vendored, upstream, &joined);
}

#[test]
fn vendored_segmentation_equals_the_crates_io_release() {
    let walking = jieba_rs::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    assert!(
        walking.automaton_bytes().is_none(),
        "the automaton is asked for"
    );
    let vendored = with_automaton(DICT);
    let upstream = jieba_rs_upstream::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    cut_all_ways(&vendored, &upstream, TRICKY);
}

/// The whole corpus (every article of every file, ~28k), title and content, HMM on and off,
/// with the trie walk (the default) and with the automaton. Without the corpus, the sample.
#[test]
fn the_whole_corpus_segments_like_the_crates_io_release() {
    let walking = jieba_rs::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    let vendored = with_automaton(DICT);
    let upstream = jieba_rs_upstream::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    let corpus = common::corpus_texts(usize::MAX);
    for (title, content) in &corpus {
        cut_many(&[&walking, &vendored], &upstream, title);
        cut_many(&[&walking, &vendored], &upstream, content);
    }
    eprintln!("{} corpus articles compared", corpus.len());
}

/// Words of frequency 0 are in the dictionary (the release's DAG has their edges, of log
/// frequency minus infinity), and a dictionary whose total is 0 makes every route's log
/// probability infinite or NaN, where the order edges are compared in decides the route.
#[test]
fn zero_frequencies_segment_like_upstream() {
    let dicts = [
        "南京 0 ns\n南京市 0 ns\n长江 0 n\n长江大桥 0 ns\n大桥 0 n\n市长 0 n\n江大桥 0 nr\n",
        "南京 100 ns\n南京市 0 ns\n长江 50 n\n长江大桥 0 ns\n大桥 40 n\n市长 0 n\n江大桥 3 nr\n",
        "南 0\n京 0\n南京市长 0\n",
    ];
    let texts = [
        "南京市长江大桥",
        "南京市长江大桥和南京市长、江大桥，南京南京",
        "南京市长江大桥南京市长江大桥南京市长江大桥南京市长江大桥南京市长江大桥南京市长江大桥南京市长江大桥",
        "北京",
        "",
    ];
    for dict in dicts {
        let vendored = with_automaton(dict);
        let upstream = jieba_rs_upstream::Jieba::with_dict(&mut dict.as_bytes()).unwrap();
        cut_all_ways(&vendored, &upstream, &texts);
    }
    // Zero frequencies added to the full dictionary, by `add_word` and `load_dict`.
    let mut vendored = with_automaton(DICT);
    let mut upstream = jieba_rs_upstream::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    for w in ["长江大桥", "市长"] {
        assert_eq!(
            vendored.add_word(w, Some(0), None),
            upstream.add_word(w, Some(0), None)
        );
    }
    assert!(
        vendored.automaton_bytes().is_some(),
        "known words keep the automaton"
    );
    cut_all_ways(&vendored, &upstream, &texts);
    let user = "南京市长 0 n\n江大 0\n";
    vendored.load_dict(&mut user.as_bytes()).unwrap();
    upstream.load_dict(&mut user.as_bytes()).unwrap();
    cut_all_ways(&vendored, &upstream, &texts);
    cut_all_ways(&vendored, &upstream, TRICKY);
}

/// Words added after loading (user dictionaries) are found like upstream's, including words that
/// extend, and are extended by, dictionary words.
#[test]
fn added_words_segment_like_upstream() {
    let mut vendored = with_automaton(DICT);
    let mut upstream = jieba_rs_upstream::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    let added = ["中国人民大会", "新冠疫苗接种点", "𠀀𠀁", "ai大模型", "的了"];
    let mut seen = HashSet::new();
    for w in added {
        assert!(seen.insert(w));
        assert_eq!(
            vendored.add_word(w, Some(100_000), None),
            upstream.add_word(w, Some(100_000), None)
        );
    }
    let mut user = "大模型应用 50000 n\n疫苗接种 80000\n".as_bytes();
    vendored.load_dict(&mut user).unwrap();
    let mut user = "大模型应用 50000 n\n疫苗接种 80000\n".as_bytes();
    upstream.load_dict(&mut user).unwrap();
    let texts = [
        "中国人民大会堂里讨论新冠疫苗接种点的ai大模型应用",
        "𠀀𠀁𠀀𠀁的了的了",
    ];
    // `load_dict` rebuilt the automaton with every word added before it.
    cut_all_ways(&vendored, &upstream, &texts);
    cut_all_ways(&vendored, &upstream, TRICKY);

    // New words after the last `load_dict`: `cut` walks the trie until the automaton is built
    // again, and segments the same either way. A word the release's blocks never contain whole
    // (it has a space or punctuation) changes nothing; a frequency change of a known word is
    // seen by the automaton too.
    for (w, f) in [
        ("大会堂里", 200_000),
        ("ai 大模型", 300_000),
        ("新冠，疫苗", 1),
        ("大模型", 9),
    ] {
        assert_eq!(
            vendored.add_word(w, Some(f), None),
            upstream.add_word(w, Some(f), None)
        );
    }
    assert!(vendored.automaton_bytes().is_none());
    for text in texts.iter().chain(TRICKY) {
        cut_both(&vendored, &upstream, text);
    }
    vendored.build_automaton();
    cut_all_ways(&vendored, &upstream, &texts);
    cut_all_ways(&vendored, &upstream, TRICKY);
    // A frequency derived by `suggest_freq` (which cuts), and a changed frequency of a word the
    // automaton lists.
    assert_eq!(
        vendored.add_word("堂里讨论", None, None),
        upstream.add_word("堂里讨论", None, None)
    );
    vendored.build_automaton();
    assert_eq!(
        vendored.add_word("大会堂里", Some(1), None),
        upstream.add_word("大会堂里", Some(1), None)
    );
    assert!(vendored.automaton_bytes().is_some());
    cut_all_ways(&vendored, &upstream, &texts);
}

/// A dictionary image (`Jieba::write_snapshot` / `from_snapshot`, what start-up loads instead of
/// the dictionary text) segments like the crates.io release loaded from the text, and imaging it
/// again gives the same bytes; words added after loading an image are found like upstream's.
#[test]
fn a_dictionary_image_segments_like_the_text_it_was_built_from() {
    let loaded = with_automaton(DICT);
    let mut image = Vec::new();
    loaded.write_snapshot(&mut image).expect("imaged");
    let mut from_image = jieba_rs::Jieba::from_snapshot(&image).unwrap();
    assert_eq!(from_image.automaton_bytes(), loaded.automaton_bytes());
    assert!(from_image.automaton_bytes().is_some());
    let mut again = Vec::new();
    from_image.write_snapshot(&mut again).expect("imaged");
    assert!(image == again, "imaging the image changed it");
    let mut upstream = jieba_rs_upstream::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    cut_all_ways(&from_image, &upstream, TRICKY);
    for (title, content) in &common::corpus_texts(300) {
        cut_both(&from_image, &upstream, title);
        cut_both(&from_image, &upstream, content);
    }
    assert_eq!(
        from_image.add_word("新冠疫苗接种点", Some(100_000), None),
        upstream.add_word("新冠疫苗接种点", Some(100_000), None)
    );
    cut_both(&from_image, &upstream, "新冠疫苗接种点的ai大模型");
    // An image written without the automaton (after `add_word`) loads without it.
    let mut image = Vec::new();
    from_image.write_snapshot(&mut image).expect("imaged");
    let walking = jieba_rs::Jieba::from_snapshot(&image).unwrap();
    assert!(walking.automaton_bytes().is_none());
    cut_both(&walking, &upstream, "新冠疫苗接种点的ai大模型");
}

/// A damaged image is refused with an error, never loaded.
#[test]
fn a_damaged_dictionary_image_is_refused() {
    let small = "南京 100 ns\n南京市 80 ns\n长江大桥 50 ns\n大桥 40 n\n";
    let loaded = with_automaton(small);
    let mut image = Vec::new();
    loaded.write_snapshot(&mut image).expect("imaged");
    assert!(jieba_rs::Jieba::from_snapshot(&image).is_ok());
    assert!(jieba_rs::Jieba::from_snapshot(&image[..image.len() - 1]).is_err());
    assert!(jieba_rs::Jieba::from_snapshot(b"jieba-snap-2 and then nonsense").is_err());
    let mut longer = image.clone();
    longer.push(0);
    assert!(jieba_rs::Jieba::from_snapshot(&longer).is_err());
    // The first record's tag index (after the 12-byte magic, the count and its frequency)
    // pointing at a tag that does not exist.
    let mut bad = image.clone();
    bad[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(jieba_rs::Jieba::from_snapshot(&bad).is_err());
    // Damage in the automaton at the end of the image: any change to its tables (a cell, a
    // failure link, an output) is either refused or, where the checks cannot tell, still loads
    // into a segmenter that never panics. Flipping each of the last bytes in turn.
    let damaged_from = image.len() - 400;
    for at in damaged_from..image.len() {
        let mut bad = image.clone();
        bad[at] ^= 0x5A;
        if let Ok(j) = jieba_rs::Jieba::from_snapshot(&bad) {
            let _ = j.cut("南京市长江大桥", true);
        }
    }
}
