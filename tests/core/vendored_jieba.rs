//! The vendored jieba-rs (vendor/jieba-rs, tuned for speed: prefetching in the trie walk and for
//! the route's frequency reads) segments exactly like the crates.io release it was copied from.
//! Fingerprints depend on every token, so any difference would silently change them.

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
];

fn cut_both(vendored: &jieba_rs::Jieba, upstream: &jieba_rs_upstream::Jieba, text: &str) {
    for hmm in [true, false] {
        let got: Vec<(&str, usize)> = vendored
            .cut(text, hmm)
            .iter()
            .map(|t| (t.word, t.start))
            .collect();
        let want: Vec<(&str, usize)> = upstream
            .cut(text, hmm)
            .iter()
            .map(|t| (t.word, t.start))
            .collect();
        assert_eq!(got, want, "hmm={hmm}: {text}");
        // The ids `cut_with_ids` hands out are the words' dictionary ids, and its words are
        // `cut`'s.
        let mut words = Vec::new();
        vendored.cut_with_ids(text, hmm, |word, id| {
            if let Some(id) = id {
                assert_eq!(vendored.word_id(word), Some(id), "{word}");
            }
            words.push(word);
        });
        let cut_words: Vec<&str> = got.iter().map(|&(w, _)| w).collect();
        assert_eq!(words, cut_words, "hmm={hmm}: {text}");
    }
}

#[test]
fn vendored_segmentation_equals_the_crates_io_release() {
    let vendored = jieba_rs::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    let upstream = jieba_rs_upstream::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    for text in TRICKY {
        cut_both(&vendored, &upstream, text);
    }
    let corpus = common::corpus_texts(300);
    for (title, content) in &corpus {
        cut_both(&vendored, &upstream, title);
        cut_both(&vendored, &upstream, content);
    }
    eprintln!("{} corpus articles compared", corpus.len());
}

/// Words added after loading (user dictionaries) are found like upstream's, including words that
/// extend, and are extended by, dictionary words.
#[test]
fn added_words_segment_like_upstream() {
    let mut vendored = jieba_rs::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
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
    for text in [
        "中国人民大会堂里讨论新冠疫苗接种点的ai大模型应用",
        "𠀀𠀁𠀀𠀁的了的了",
    ] {
        cut_both(&vendored, &upstream, text);
    }
}

/// A dictionary image (`Jieba::write_snapshot` / `from_snapshot`, what start-up loads instead of
/// the dictionary text) segments like the crates.io release loaded from the text, and imaging it
/// again gives the same bytes; words added after loading an image are found like upstream's.
#[test]
fn a_dictionary_image_segments_like_the_text_it_was_built_from() {
    let loaded = jieba_rs::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    let mut image = Vec::new();
    loaded.write_snapshot(&mut image).expect("imaged");
    let mut from_image = jieba_rs::Jieba::from_snapshot(&image).unwrap();
    let mut again = Vec::new();
    from_image.write_snapshot(&mut again).expect("imaged");
    assert!(image == again, "imaging the image changed it");
    let mut upstream = jieba_rs_upstream::Jieba::with_dict(&mut DICT.as_bytes()).unwrap();
    for text in TRICKY {
        cut_both(&from_image, &upstream, text);
    }
    for (title, content) in &common::corpus_texts(300) {
        cut_both(&from_image, &upstream, title);
        cut_both(&from_image, &upstream, content);
    }
    assert_eq!(
        from_image.add_word("新冠疫苗接种点", Some(100_000), None),
        upstream.add_word("新冠疫苗接种点", Some(100_000), None)
    );
    cut_both(&from_image, &upstream, "新冠疫苗接种点的ai大模型");
}

/// A damaged image is refused with an error, never loaded.
#[test]
fn a_damaged_dictionary_image_is_refused() {
    let small = "南京 100 ns\n南京市 80 ns\n长江大桥 50 ns\n大桥 40 n\n";
    let loaded = jieba_rs::Jieba::with_dict(&mut small.as_bytes()).unwrap();
    let mut image = Vec::new();
    loaded.write_snapshot(&mut image).expect("imaged");
    assert!(jieba_rs::Jieba::from_snapshot(&image).is_ok());
    assert!(jieba_rs::Jieba::from_snapshot(&image[..image.len() - 1]).is_err());
    assert!(jieba_rs::Jieba::from_snapshot(b"jieba-snap-1 and then nonsense").is_err());
    let mut longer = image.clone();
    longer.push(0);
    assert!(jieba_rs::Jieba::from_snapshot(&longer).is_err());
    // The first record's tag index (after the 12-byte magic, the count and its frequency)
    // pointing at a tag that does not exist.
    let mut bad = image.clone();
    bad[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(jieba_rs::Jieba::from_snapshot(&bad).is_err());
}
