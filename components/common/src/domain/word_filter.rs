//! Blocked-word matching that sees through the usual evasions: case, diacritics, look-alike
//! letters from other scripts, leetspeak digits and symbols, zero-width characters,
//! repeated letters ("baaad") and letters spread out with spaces or dots ("b a d",
//! "b.a.d").
//!
//! A message is cut into words; each word (and each run of short fragments joined, for the
//! spacing trick) is compared with each pattern as a whole word, so a blocked word inside
//! a longer clean word ("ass" in "class") is not a match. A pattern may end or start with
//! `*` to match words that begin or end with it (`idiot*` matches "idiots").
//!
//! Repeated letters compare by runs: the word's run of a letter must be at least as long
//! as the pattern's, so "baaad" matches "bad" but "as" does not match "ass".

/// Longest pattern, in characters.
pub const MAX_PATTERN_CHARS: usize = 64;
/// Most patterns in one list.
pub const MAX_PATTERNS: usize = 500;
/// Fragments at most this long are joined with their neighbours ("f u c k", "fu ck").
const FRAGMENT_CHARS: usize = 3;

/// One letter and how many times it repeats in a row.
type Run = (char, usize);

/// A blocked pattern, prepared for matching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// The pattern as its owner wrote it.
    pub source: String,
    runs: Vec<Run>,
    any_prefix: bool,
    any_suffix: bool,
}

impl Pattern {
    /// Prepares `source`; `None` when it has no letters or digits left to match.
    pub fn new(source: &str) -> Option<Pattern> {
        let trimmed = source.trim();
        let any_prefix = trimmed.starts_with('*');
        let any_suffix = trimmed.ends_with('*') && trimmed.len() > 1;
        let letters: Vec<char> = fold(trimmed.trim_matches('*'), true)
            .into_iter()
            .filter(|c| c.is_alphanumeric())
            .collect();
        let runs = runs_of_chars(&letters);
        (!runs.is_empty()).then(|| Pattern {
            source: trimmed.to_string(),
            runs,
            any_prefix,
            any_suffix,
        })
    }

    /// Whether `word` (already folded) is this pattern.
    fn matches_word(&self, word: &[Run]) -> bool {
        let (p, w) = (&self.runs, word);
        if w.len() < p.len() {
            return false;
        }
        let fits = |at: usize| {
            p.iter().zip(&w[at..]).all(|(&(pc, pn), &(wc, wn))| {
                // A run at the pattern's open edge may be longer on either side of it.
                pc == wc && wn >= pn
            })
        };
        match (self.any_prefix, self.any_suffix) {
            (false, false) => w.len() == p.len() && fits(0),
            (false, true) => fits(0),
            (true, false) => fits(w.len() - p.len()),
            (true, true) => (0..=w.len() - p.len()).any(fits),
        }
    }
}

/// Checks a list of raw patterns: each at most [`MAX_PATTERN_CHARS`], at most
/// [`MAX_PATTERNS`], each with something to match. Answers them trimmed, deduplicated.
pub fn clean_patterns(raw: &[String]) -> Result<Vec<String>, String> {
    if raw.len() > MAX_PATTERNS {
        return Err(format!("at most {MAX_PATTERNS} words"));
    }
    let mut out: Vec<String> = Vec::new();
    for word in raw {
        let word = word.trim();
        if word.chars().count() > MAX_PATTERN_CHARS {
            return Err(format!(
                "each word is at most {MAX_PATTERN_CHARS} characters"
            ));
        }
        if Pattern::new(word).is_none() {
            return Err(format!("`{word}` has no letters or digits to match"));
        }
        if !out.iter().any(|w| w == word) {
            out.push(word.to_string());
        }
    }
    Ok(out)
}

/// The first pattern that `message` contains, if any.
pub fn first_match<'p>(message: &str, patterns: &'p [Pattern]) -> Option<&'p Pattern> {
    if patterns.is_empty() {
        return None;
    }
    // Symbols that stand for letters ("sh!t", "d@rn") are also punctuation ("heck!"):
    // the message is read both ways.
    let readings = if message.chars().any(is_leet_symbol) {
        vec![words_of(message, false), words_of(message, true)]
    } else {
        vec![words_of(message, false)]
    };
    readings
        .iter()
        .find_map(|words| match_words(words, patterns))
}

fn match_words<'p>(words: &[Vec<char>], patterns: &'p [Pattern]) -> Option<&'p Pattern> {
    let runs: Vec<Vec<Run>> = words.iter().map(|w| runs_of_chars(w)).collect();
    for pattern in patterns {
        if runs.iter().any(|w| pattern.matches_word(w)) {
            return Some(pattern);
        }
    }
    // The spacing trick: consecutive short fragments joined ("b a d", "fu ck").
    let mut start = 0;
    while start < words.len() {
        if words[start].len() > FRAGMENT_CHARS {
            start += 1;
            continue;
        }
        let mut end = start;
        while end < words.len() && words[end].len() <= FRAGMENT_CHARS {
            end += 1;
        }
        for from in start..end {
            let mut joined: Vec<char> = Vec::new();
            for word in &words[from..end] {
                joined.extend(word);
                if joined.len() > words[from].len() {
                    let runs = runs_of_chars(&joined);
                    if let Some(p) = patterns.iter().find(|p| p.matches_word(&runs)) {
                        return Some(p);
                    }
                }
            }
        }
        start = end;
    }
    None
}

/// The message's words after folding: letters and digits, cut at everything else.
fn words_of(message: &str, symbols_as_letters: bool) -> Vec<Vec<char>> {
    let mut words = Vec::new();
    let mut current = Vec::new();
    for c in fold(message, symbols_as_letters) {
        if c.is_alphanumeric() {
            current.push(c);
        } else if !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

fn runs_of_chars(chars: &[char]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for &c in chars {
        match runs.last_mut() {
            Some((last, n)) if *last == c => *n += 1,
            _ => runs.push((c, 1)),
        }
    }
    runs
}

fn is_leet_symbol(c: char) -> bool {
    matches!(c, '!' | '|' | '@' | '$' | '+')
}

/// Lowercases and maps every character to the Latin letter it stands for (symbols such as
/// `@` and `$` only with `symbols_as_letters`); zero-width and combining characters
/// disappear.
fn fold(text: &str, symbols_as_letters: bool) -> Vec<char> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        // Most text is plain ASCII letters, which stand for themselves.
        if c.is_ascii_alphabetic() {
            out.push(c.to_ascii_lowercase());
            continue;
        }
        if is_invisible(c) {
            continue;
        }
        let c = fullwidth_to_ascii(c);
        if is_leet_symbol(c) && !symbols_as_letters {
            out.push(' ');
            continue;
        }
        match look_alike(c) {
            Some(mapped) => out.push(mapped),
            None => out.extend(c.to_lowercase()),
        }
    }
    out
}

fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}'
        | '\u{0300}'..='\u{036F}' | '\u{FE00}'..='\u{FE0F}')
}

fn fullwidth_to_ascii(c: char) -> char {
    match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        _ => c,
    }
}

/// The Latin letter a look-alike stands for: accented Latin, Cyrillic and Greek
/// homoglyphs, leetspeak digits and symbols.
fn look_alike(c: char) -> Option<char> {
    Some(match c {
        'À'..='Å' | 'à'..='å' | 'Ā' | 'ā' | 'Ă' | 'ă' | 'Ą' | 'ą' => 'a',
        'Ç' | 'ç' | 'Ć' | 'ć' | 'Č' | 'č' => 'c',
        'È'..='Ë' | 'è'..='ë' | 'Ē' | 'ē' | 'Ė' | 'ė' | 'Ę' | 'ę' | 'Ě' | 'ě' => 'e',
        'Ì'..='Ï' | 'ì'..='ï' | 'Ī' | 'ī' | 'Į' | 'į' | 'ı' => 'i',
        'Ñ' | 'ñ' | 'Ń' | 'ń' | 'Ň' | 'ň' => 'n',
        'Ò'..='Ö' | 'ò'..='ö' | 'Ø' | 'ø' | 'Ō' | 'ō' | 'Ő' | 'ő' => 'o',
        'Ù'..='Ü' | 'ù'..='ü' | 'Ū' | 'ū' | 'Ů' | 'ů' | 'Ű' | 'ű' => 'u',
        'Ý' | 'ý' | 'ÿ' | 'Ÿ' => 'y',
        'Ś' | 'ś' | 'Š' | 'š' | 'Ş' | 'ş' => 's',
        'Ź' | 'ź' | 'Ż' | 'ż' | 'Ž' | 'ž' => 'z',
        'ß' => 's',
        // Cyrillic
        'А' | 'а' => 'a',
        'В' | 'в' => 'b',
        'Е' | 'е' | 'Ё' | 'ё' => 'e',
        'К' | 'к' => 'k',
        'М' | 'м' => 'm',
        'Н' | 'н' => 'h',
        'О' | 'о' => 'o',
        'Р' | 'р' => 'p',
        'С' | 'с' => 'c',
        'Т' | 'т' => 't',
        'У' | 'у' => 'y',
        'Х' | 'х' => 'x',
        'І' | 'і' | 'Ї' | 'ї' => 'i',
        'Ј' | 'ј' => 'j',
        'ԁ' => 'd',
        'һ' => 'h',
        'Ѕ' | 'ѕ' => 's',
        // Greek
        'Α' | 'α' => 'a',
        'Β' | 'β' => 'b',
        'Ε' | 'ε' => 'e',
        'Η' => 'h',
        'Ι' | 'ι' => 'i',
        'Κ' | 'κ' => 'k',
        'Μ' => 'm',
        'Ν' | 'ν' => 'v',
        'Ο' | 'ο' => 'o',
        'Ρ' | 'ρ' => 'p',
        'Τ' | 'τ' => 't',
        'Υ' | 'υ' => 'y',
        'Χ' | 'χ' => 'x',
        'Ζ' => 'z',
        // Leetspeak
        '0' => 'o',
        '1' | '!' | '|' => 'i',
        '3' => 'e',
        '4' | '@' => 'a',
        '5' | '$' => 's',
        '7' | '+' => 't',
        '8' => 'b',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(words: &[&str]) -> Vec<Pattern> {
        words.iter().filter_map(|w| Pattern::new(w)).collect()
    }

    fn caught(message: &str, words: &[&str]) -> bool {
        first_match(message, &list(words)).is_some()
    }

    #[test]
    fn evasions_are_caught() {
        let blocked = ["darn", "heck"];
        for message in [
            "darn",
            "oh DARN it",
            "what the Heck!",
            "daaaarn",
            "dddaaarrrnnn",
            "d a r n",
            "d.a.r.n",
            "d-a-r-n you",
            "da rn",
            "d4rn",
            "h3ck",
            "d@rn",
            "sh!t happens, d@rn",
            "h\u{0435}ck",                    // Cyrillic e
            "\u{0501}arn h\u{0435}\u{0441}k", // Cyrillic e and c
            "d\u{200B}a\u{200B}r\u{200B}n",   // zero-width spaces
            "ｄａｒｎ",                       // fullwidth
            "dárn",
            "d\u{0301}arn", // combining accent
        ] {
            assert!(caught(message, &blocked), "{message:?} should be caught");
        }
    }

    #[test]
    fn clean_words_that_look_similar_are_not_caught() {
        let blocked = ["ass", "darn", "heck"];
        for message in [
            "first class seats",
            "pass the salt",
            "as I said",
            "assassin's creed", // a different word altogether
            "darned socks",     // not the word itself (no wildcard)
            "she checked the deck",
            "hectic day",
            "a s a p", // fragments that join to a different word
            "dart n arrows",
            "2000 viewers",
        ] {
            assert!(!caught(message, &blocked), "{message:?} should pass");
        }
    }

    #[test]
    fn wildcards_match_word_starts_and_ends() {
        let blocked = ["idiot*", "*head"];
        assert!(caught("you idiots", &blocked));
        assert!(caught("what an 1d1ooot", &blocked));
        assert!(caught("hey meathead", &blocked));
        assert!(!caught("ideal", &blocked));
        assert!(!caught("heading out", &blocked));
        assert!(caught("x", &["*x*"]));
        assert!(caught("boxes", &["*x*"]));
    }

    #[test]
    fn patterns_are_checked() {
        assert_eq!(
            clean_patterns(&[" darn ".into(), "darn".into(), "heck".into()]),
            Ok(vec!["darn".to_string(), "heck".to_string()])
        );
        assert!(clean_patterns(&["***".into()]).is_err());
        assert!(clean_patterns(&["x".repeat(65)]).is_err());
        assert!(clean_patterns(&vec!["a".to_string(); 501]).is_err());
        assert!(first_match("anything", &[]).is_none());
    }
}
