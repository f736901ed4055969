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
struct Pattern {
    runs: Vec<Run>,
    any_prefix: bool,
    any_suffix: bool,
}

impl Pattern {
    /// Prepares `source`; `None` when it has no letters or digits left to match.
    fn new(source: &str) -> Option<Pattern> {
        let trimmed = source.trim();
        let any_prefix = trimmed.starts_with('*');
        let any_suffix = trimmed.ends_with('*') && trimmed.len() > 1;
        let letters: Vec<char> = fold(trimmed.trim_matches('*'), true)
            .into_iter()
            .filter(|c| c.is_alphanumeric())
            .collect();
        let runs = runs_of_chars(&letters);
        (!runs.is_empty()).then_some(Pattern {
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
        // Counted as sent, spaces included: the bound is the request's, not the stored word's.
        if word.chars().count() > MAX_PATTERN_CHARS {
            return Err(format!(
                "each word is at most {MAX_PATTERN_CHARS} characters"
            ));
        }
        let word = word.trim();
        if Pattern::new(word).is_none() {
            return Err(format!("`{word}` has no letters or digits to match"));
        }
        if !out.iter().any(|w| w == word) {
            out.push(word.to_string());
        }
    }
    Ok(out)
}

/// The version line of [`compile`]'s form; a stored list of another version is compiled
/// again from its words.
const COMPILED_VERSION: &str = "wf1";

/// A list's patterns prepared once, when the list is saved, so that a chat post neither
/// folds them again nor compares every word with every pattern. One line per pattern,
/// `kind TAB skeleton TAB folded`: `kind` is `=` for a whole word, `>` (`x*`), `<` (`*x`)
/// or `~` (`*x*`); `folded` is its letters after folding; `skeleton` is those letters
/// with repeats collapsed, the key whole words are looked up by. Whole-word patterns come
/// first, sorted by skeleton.
pub fn compile(words: &[String]) -> String {
    let mut lines: Vec<(char, String, String)> = words
        .iter()
        .filter_map(|w| Pattern::new(w))
        .map(|p| {
            let kind = match (p.any_prefix, p.any_suffix) {
                (false, false) => '=',
                (false, true) => '>',
                (true, false) => '<',
                (true, true) => '~',
            };
            let skeleton: String = p.runs.iter().map(|&(c, _)| c).collect();
            let folded: String = p
                .runs
                .iter()
                .flat_map(|&(c, n)| std::iter::repeat_n(c, n))
                .collect();
            (kind, skeleton, folded)
        })
        .collect();
    // Whole-word patterns first, by skeleton; then the wildcards.
    lines.sort_by(|a, b| (a.0 != '=', &a.1, a.0, &a.2).cmp(&(b.0 != '=', &b.1, b.0, &b.2)));
    lines.dedup();
    let mut out = String::from(COMPILED_VERSION);
    for (kind, skeleton, folded) in lines {
        out.push('\n');
        out.push(kind);
        out.push('\t');
        out.push_str(&skeleton);
        out.push('\t');
        out.push_str(&folded);
    }
    out
}

/// Whether `compiled` was compiled by this version of [`compile`].
pub fn is_current(compiled: &str) -> bool {
    compiled
        .strip_prefix(COMPILED_VERSION)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('\n'))
}

/// A compiled list (see [`compile`]) read for matching, borrowing the stored text. Reading
/// it only finds its lines: whole-word lines are looked up in place.
#[derive(Debug, Default)]
pub struct Blocklist<'a> {
    /// Whole-word patterns: (skeleton, folded), sorted by skeleton.
    whole: Vec<(&'a str, &'a str)>,
    /// Patterns with a wildcard, prepared.
    wild: Vec<Pattern>,
}

/// A line's skeleton and folded letters.
fn fields(line: &str) -> Option<(&str, &str)> {
    line.get(2..)?.split_once('\t')
}

impl<'a> Blocklist<'a> {
    /// Reads a compiled list; `None` when it is not of this version (compile it again) or
    /// is damaged.
    pub fn parse(compiled: &'a str) -> Option<Blocklist<'a>> {
        let mut lines = compiled.split('\n');
        if lines.next() != Some(COMPILED_VERSION) {
            return None;
        }
        let mut list = Blocklist::default();
        for line in lines {
            let kind = line.as_bytes().first().copied();
            if kind == Some(b'=') {
                list.whole.push(fields(line)?);
                continue;
            }
            let (_, folded) = fields(line)?;
            list.wild.push(Pattern {
                runs: runs_of_str(folded),
                any_prefix: kind != Some(b'>'),
                any_suffix: match kind {
                    Some(b'<') => false,
                    Some(b'>' | b'~') => true,
                    _ => return None,
                },
            });
        }
        // Lookups rely on compile's order; one line out of it would hide others.
        if !list.whole.is_sorted_by_key(|&(skeleton, _)| skeleton) {
            return None;
        }
        Some(list)
    }

    fn is_empty(&self) -> bool {
        self.whole.is_empty() && self.wild.is_empty()
    }

    /// Whether a folded word (as runs) is one of this list's patterns.
    fn matches_word(&self, word: &[Run]) -> bool {
        // UTF-8 orders strings as their characters, so a word's letters compare with a
        // stored skeleton without building a string.
        let letters = || word.iter().map(|&(c, _)| c);
        let from = self
            .whole
            .partition_point(|(skeleton, _)| skeleton.chars().lt(letters()));
        let whole = self.whole[from..]
            .iter()
            .take_while(|(skeleton, _)| skeleton.chars().eq(letters()))
            .any(|(_, folded)| {
                // Same letters in the same order; the word repeats each at least as often.
                let mut counts = runs_of_str(folded).into_iter();
                word.iter()
                    .all(|&(_, wn)| counts.next().is_some_and(|(_, pn)| wn >= pn))
            });
        whole || self.wild.iter().any(|p| p.matches_word(word))
    }
}

/// Whether `message` contains a pattern of any of `lists`.
pub fn is_blocked(message: &str, lists: &[Blocklist<'_>]) -> bool {
    if lists.iter().all(Blocklist::is_empty) {
        return false;
    }
    // Symbols that stand for letters ("sh!t", "d@rn") are also punctuation ("heck!"):
    // the message is read both ways.
    let matches = |runs: &[Run]| lists.iter().any(|l| l.matches_word(runs));
    if match_words(&words_of(message, false), &matches) {
        return true;
    }
    message.chars().any(is_leet_symbol) && match_words(&words_of(message, true), &matches)
}

fn match_words(words: &[Vec<char>], matches: &impl Fn(&[Run]) -> bool) -> bool {
    if words.iter().any(|w| matches(&runs_of_chars(w))) {
        return true;
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
                if joined.len() > words[from].len() && matches(&runs_of_chars(&joined)) {
                    return true;
                }
            }
        }
        start = end;
    }
    false
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

fn runs_of_str(folded: &str) -> Vec<Run> {
    runs_of_chars(&folded.chars().collect::<Vec<_>>())
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

    /// Matches as a chat post does: through the list's compiled form.
    fn caught(message: &str, words: &[&str]) -> bool {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let compiled = compile(&words);
        let list = Blocklist::parse(&compiled).expect("a compiled list reads back");
        is_blocked(message, &[list])
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
    fn compiled_lists_read_back_and_combine() {
        let creator = compile(&["heck".into(), "idiot*".into(), "b\u{0430}d".into()]);
        let tenant = compile(&["darn".into(), "darn".into()]);
        assert_eq!(tenant, "wf1\n=\tdarn\tdarn", "duplicates are stored once");
        let lists = [
            Blocklist::parse(&creator).unwrap(),
            Blocklist::parse(&tenant).unwrap(),
        ];
        for message in ["oh heck", "d a r n", "idiots", "baaad", "b4d"] {
            assert!(is_blocked(message, &lists), "{message:?} should be caught");
        }
        assert!(!is_blocked("badge ideal darnit", &lists));
        // Another version (or a damaged text) is not read: the caller compiles the words.
        assert!(Blocklist::parse("wf0\n=\tdarn\tdarn").is_none());
        assert!(Blocklist::parse("wf1\n=darn").is_none());
        // Out of compile's order, or a line without its fields: not read either.
        assert!(Blocklist::parse("wf1\n=\txyz\txyz\n=\tdarn\tdarn").is_none());
        assert!(Blocklist::parse("wf1\n=\tdarn\tdarn\n=\txyz").is_none());
    }

    #[test]
    fn patterns_with_the_same_letters_keep_their_repeats() {
        // "as" and "ass" share the skeleton "as": each needs its own repeats.
        assert!(!caught("as I said", &["ass", "asss"]));
        assert!(caught("ass", &["asss", "ass"]));
        assert!(caught("asss", &["asss"]));
        assert!(!caught("ass", &["asss"]));
    }

    #[test]
    fn patterns_are_checked() {
        assert_eq!(
            clean_patterns(&[" darn ".into(), "darn".into(), "heck".into()]),
            Ok(vec!["darn".to_string(), "heck".to_string()])
        );
        assert!(clean_patterns(&["***".into()]).is_err());
        assert!(clean_patterns(&["x".repeat(65)]).is_err());
        // Trimming does not bring a longer word within the bound.
        assert!(clean_patterns(&[format!("\u{b}{}", "x".repeat(64))]).is_err());
        assert!(clean_patterns(&[format!(" {} ", "x".repeat(62))]).is_ok());
        assert!(clean_patterns(&vec!["a".to_string(); 501]).is_err());
        assert!(!caught("anything", &[]));
        assert!(!is_blocked("anything", &[]));
    }
}
