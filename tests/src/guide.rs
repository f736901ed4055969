//! Reads the guides' examples as tests: the fenced blocks of a Markdown file, a shell
//! block's steps (commands, the answers the guide shows after `# ->`, and the variables it
//! asks the reader to copy from an answer), and the answer patterns the guides write.
//!
//! The patterns are JSON as a reader skims it: `...` (or `…`) stands for whatever else an
//! object or array holds, or for any part of a string; `<name>` in a string is a value the
//! reader keeps for later (`<upload>`, `<bob's id>`), and a later command's `<name>` is
//! replaced by it. A status may lead (`# -> 201 {...}`), and a plain list of field names
//! (`# -> startedAt, endedAt, ...`) asks only that they are there.

use serde_json::Value;
use std::collections::BTreeMap;

/// A fenced block of a Markdown file.
#[derive(Debug, Clone)]
pub struct Block {
    pub path: String,
    /// The line of the opening fence (1-based).
    pub line: usize,
    pub lang: String,
    /// The block's lines with their line numbers.
    pub lines: Vec<(usize, String)>,
}

impl Block {
    pub fn text(&self) -> String {
        let mut text = String::new();
        for (_, line) in &self.lines {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    pub fn at(&self) -> String {
        format!("{}:{}", self.path, self.line)
    }
}

/// The fenced blocks of `markdown`.
pub fn blocks(path: &str, markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (index, line) in markdown.lines().enumerate() {
        let number = index + 1;
        if let Some(fence) = line.trim_start().strip_prefix("```") {
            match open.take() {
                Some(block) => blocks.push(block),
                None => {
                    open = Some(Block {
                        path: path.to_string(),
                        line: number,
                        lang: fence.trim().to_string(),
                        lines: Vec::new(),
                    })
                }
            }
        } else if let Some(block) = open.as_mut() {
            block.lines.push((number, line.to_string()));
        }
    }
    blocks
}

/// One step of a shell example.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A complete shell command (possibly several lines).
    Command { line: usize, text: String },
    /// The answer the guide shows for the command before it.
    Expect { line: usize, text: String },
    /// `NAME=<placeholder>`: the reader copies a value of the answer before.
    Bind {
        line: usize,
        name: String,
        placeholder: String,
    },
}

/// Whether `text` is complete shell syntax (`bash -n`): a command may span lines through
/// a trailing `\`, an open quote or a `for ... done`.
fn complete_shell(text: &str) -> bool {
    if text.trim_end().ends_with('\\') {
        return false;
    }
    std::process::Command::new("bash")
        .args(["-n", "-c", text])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Whether `value` (the right side of an assignment) is a placeholder for the reader to
/// fill in rather than a value to run.
fn is_placeholder(value: &str) -> bool {
    !value.contains('$')
        && !value.contains('(')
        && (value.contains("...")
            || value.contains('…')
            || placeholder_names(value).next().is_some())
}

/// The `<name>` placeholders in `text`.
pub fn placeholder_names(text: &str) -> impl Iterator<Item = &str> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            let start = rest.find('<')?;
            let after = &rest[start + 1..];
            let end = after.find('>')?;
            let name = &after[..end];
            rest = &after[end + 1..];
            let plausible = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && !name.contains('<')
                && !name.contains('"');
            if plausible {
                return Some(&text[text.len() - rest.len() - end - 2..text.len() - rest.len()]);
            }
        }
    })
}

/// The steps of a shell block: each command, each `# -> answer` (continued on the
/// comment lines after it while its brackets are open), and each `NAME=<placeholder>`.
pub fn steps(block: &Block) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    let mut expecting: Option<(usize, String)> = None;
    for (number, line) in &block.lines {
        if let Some((start, text)) = pending.as_mut() {
            text.push('\n');
            text.push_str(line);
            if complete_shell(text) {
                steps.push(Step::Command {
                    line: *start,
                    text: std::mem::take(text),
                });
                pending = None;
            }
            continue;
        }
        let trimmed = line.trim();
        if let Some((_, text)) = expecting.as_mut() {
            if let Some(more) = trimmed.strip_prefix('#')
                && !balanced(text)
            {
                text.push(' ');
                text.push_str(more.trim());
                continue;
            }
            let (line, text) = expecting.take().expect("an expectation is open");
            steps.push(Step::Expect { line, text });
        }
        if trimmed.is_empty() {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            if let Some(answer) = comment.trim_start().strip_prefix("->") {
                expecting = Some((*number, answer.trim().to_string()));
            }
            continue;
        }
        if let Some((name, value)) = assignment(trimmed)
            && is_placeholder(value)
        {
            steps.push(Step::Bind {
                line: *number,
                name: name.to_string(),
                placeholder: value.to_string(),
            });
            continue;
        }
        let (text, answer) = split_trailing_answer(line);
        if complete_shell(&text) {
            steps.push(Step::Command {
                line: *number,
                text,
            });
            if let Some(answer) = answer {
                steps.push(Step::Expect {
                    line: *number,
                    text: answer,
                });
            }
        } else {
            pending = Some((*number, line.clone()));
        }
    }
    if let Some((line, text)) = expecting {
        steps.push(Step::Expect { line, text });
    }
    if let Some((line, text)) = pending {
        panic!("{}:{line}: the command never ends: {text}", block.path);
    }
    steps
}

/// A command line's trailing `# -> answer`, split off.
fn split_trailing_answer(line: &str) -> (String, Option<String>) {
    match line.find("# ->") {
        Some(at) if !line[..at].trim().is_empty() && complete_shell(&line[..at]) => (
            line[..at].trim_end().to_string(),
            Some(line[at + 4..].trim().to_string()),
        ),
        _ => (line.to_string(), None),
    }
}

/// `NAME=value` alone on a line (no command after it).
fn assignment(line: &str) -> Option<(&str, &str)> {
    let (name, value) = line.split_once('=')?;
    let value = match value.find(" #") {
        Some(at) => value[..at].trim_end(),
        None => value,
    };
    let is_name = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    let one_placeholder = value.starts_with('<') && value.ends_with('>') && !value.contains('"');
    (is_name && (one_placeholder || !value.contains(char::is_whitespace))).then_some((name, value))
}

/// Whether the brackets of a (partial) answer are closed, outside its strings.
fn balanced(text: &str) -> bool {
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            _ => {}
        }
    }
    depth <= 0
}

/// An answer as a guide shows it.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// `...`: anything.
    Any,
    Null,
    Bool(bool),
    Number(serde_json::Number),
    /// A string glob (see [`StringPattern`]).
    String(String),
    /// Members in order; `open` when `...` stands for more.
    Object {
        members: Vec<(String, Pattern)>,
        open: bool,
    },
    Array {
        items: Vec<Pattern>,
        open: bool,
    },
}

/// What a `# -> ...` line expects.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    pub status: Option<u16>,
    pub body: ExpectedBody,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExpectedBody {
    /// Nothing beyond the status.
    Nothing,
    Json(Pattern),
    /// Top-level fields that must be present.
    Fields(Vec<String>),
}

/// Parses the text after `# ->`.
pub fn expectation(text: &str) -> Result<Expectation, String> {
    let text = text.trim();
    let (status, rest) = match text.get(..3).and_then(|s| s.parse::<u16>().ok()) {
        Some(code) if text[3..].starts_with([' ', ',']) || text.len() == 3 => {
            (Some(code), text[3..].trim_start_matches([' ', ',']))
        }
        _ => (None, text),
    };
    let rest = rest.trim();
    let body = if rest.is_empty() {
        ExpectedBody::Nothing
    } else if rest.starts_with(['{', '[']) {
        let mut parser = Parser { text: rest, at: 0 };
        let pattern = parser.value()?;
        ExpectedBody::Json(pattern)
    } else if rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        let fields = rest
            .split(',')
            .filter_map(|item| item.split_whitespace().next())
            .filter(|word| *word != "..." && *word != "…")
            .map(|word| word.to_string())
            .collect::<Vec<_>>();
        ExpectedBody::Fields(fields)
    } else {
        return Err(format!("an answer the guide suite cannot read: {text}"));
    };
    Ok(Expectation { status, body })
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn skip_space(&mut self) {
        let trimmed = self.rest().trim_start();
        self.at = self.text.len() - trimmed.len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn ellipsis(&mut self) -> bool {
        self.eat("...") || self.eat("…")
    }

    fn fail<T>(&self, what: &str) -> Result<T, String> {
        Err(format!(
            "{what} at `{}`",
            self.rest().chars().take(30).collect::<String>()
        ))
    }

    fn value(&mut self) -> Result<Pattern, String> {
        self.skip_space();
        if self.ellipsis() {
            return Ok(Pattern::Any);
        }
        if self.eat("{") {
            return self.object();
        }
        if self.eat("[") {
            return self.array();
        }
        if self.rest().starts_with('"') {
            return self.string().map(Pattern::String);
        }
        for (word, pattern) in [
            ("true", Pattern::Bool(true)),
            ("false", Pattern::Bool(false)),
            ("null", Pattern::Null),
        ] {
            if self.eat(word) {
                return Ok(pattern);
            }
        }
        let number: String = self
            .rest()
            .chars()
            .take_while(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
            .collect();
        match serde_json::from_str::<serde_json::Number>(&number) {
            Ok(n) if !number.is_empty() => {
                self.at += number.len();
                Ok(Pattern::Number(n))
            }
            _ => self.fail("a value expected"),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.skip_space();
        let rest = self.rest();
        let mut end = None;
        let mut escaped = false;
        for (i, c) in rest.char_indices().skip(1) {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end else {
            return self.fail("an unterminated string");
        };
        let literal = &rest[..=end];
        let text: String = serde_json::from_str(literal).map_err(|e| format!("{e}: {literal}"))?;
        self.at += end + 1;
        Ok(text)
    }

    /// The items of an object or array up to `close`, and whether `...` stood for more.
    fn items<T>(
        &mut self,
        close: &str,
        mut item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<(Vec<T>, bool), String> {
        let (mut items, mut open) = (Vec::new(), false);
        if self.eat(close) {
            return Ok((items, open));
        }
        loop {
            if self.ellipsis() {
                open = true;
            } else {
                items.push(item(self)?);
            }
            if self.eat(close) {
                return Ok((items, open));
            }
            if !self.eat(",") {
                return self.fail(&format!("`,` or `{close}` expected"));
            }
        }
    }

    fn object(&mut self) -> Result<Pattern, String> {
        let (members, open) = self.items("}", |p| {
            let key = p.string()?;
            if !p.eat(":") {
                return p.fail("`:` expected");
            }
            Ok((key, p.value()?))
        })?;
        Ok(Pattern::Object { members, open })
    }

    fn array(&mut self) -> Result<Pattern, String> {
        let (items, open) = self.items("]", Self::value)?;
        Ok(Pattern::Array { items, open })
    }
}

/// Values a reader keeps: `<name>` placeholders by name.
pub type Kept = BTreeMap<String, String>;

/// Checks `actual` against `pattern`, keeping the values of its `<name>` placeholders.
/// An object the guide shows without `...` must have exactly its fields.
pub fn check(pattern: &Pattern, actual: &Value, path: &str, kept: &mut Kept) -> Result<(), String> {
    let mismatch = |what: String| {
        Err(format!(
            "{}: {what}",
            if path.is_empty() { "the answer" } else { path }
        ))
    };
    match (pattern, actual) {
        (Pattern::Any, _) => Ok(()),
        (Pattern::Null, Value::Null) => Ok(()),
        (Pattern::Bool(a), Value::Bool(b)) if a == b => Ok(()),
        (Pattern::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => Ok(()),
        (Pattern::String(glob), Value::String(s)) => match glob_match(glob, s) {
            Some(captures) => {
                for (name, value) in captures {
                    if let Some(before) = kept.get(&name)
                        && before != &value
                        && !glob.contains("...")
                    {
                        return mismatch(format!("{name} was {before} before and is {value} here"));
                    }
                    kept.insert(name, value);
                }
                Ok(())
            }
            None => mismatch(format!("the guide shows {glob:?}, the answer is {s:?}")),
        },
        (Pattern::Object { members, open }, Value::Object(map)) => {
            for (key, member) in members {
                match map.get(key) {
                    Some(value) => check(member, value, &format!("{path}.{key}"), kept)?,
                    None => return mismatch(format!("no field `{key}` (the answer: {actual})")),
                }
            }
            if !open {
                let extra: Vec<&String> = map
                    .keys()
                    .filter(|k| !members.iter().any(|(m, _)| m == *k))
                    .collect();
                if !extra.is_empty() {
                    return mismatch(format!(
                        "fields the guide does not show (add them or `...`): {extra:?}"
                    ));
                }
            }
            Ok(())
        }
        (Pattern::Array { items, open }, Value::Array(values)) => {
            if values.len() < items.len() || (!open && values.len() != items.len()) {
                return mismatch(format!(
                    "the guide shows {} items, the answer has {}",
                    items.len(),
                    values.len()
                ));
            }
            for (i, (item, value)) in items.iter().zip(values).enumerate() {
                check(item, value, &format!("{path}[{i}]"), kept)?;
            }
            Ok(())
        }
        _ => mismatch(format!(
            "the guide shows {pattern:?}, the answer is {actual}"
        )),
    }
}

/// A piece of a string pattern.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Literal(&'a str),
    Wildcard,
    Keep(&'a str),
}

fn pieces(glob: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = glob;
    while !rest.is_empty() {
        let next_keep = placeholder_names(rest).next().map(|p| {
            let at = rest.find(p).expect("the placeholder is in the text");
            (at, p)
        });
        let next_dots = [rest.find("..."), rest.find('…')]
            .into_iter()
            .flatten()
            .min();
        let next = match (next_keep, next_dots) {
            (Some((k, p)), Some(d)) if k < d => Some((k, Piece::Keep(&p[1..p.len() - 1]), p.len())),
            (_, Some(d)) => {
                let len = if rest[d..].starts_with("...") {
                    3
                } else {
                    '…'.len_utf8()
                };
                Some((d, Piece::Wildcard, len))
            }
            (Some((k, p)), None) => Some((k, Piece::Keep(&p[1..p.len() - 1]), p.len())),
            (None, None) => None,
        };
        match next {
            Some((at, piece, len)) => {
                if at > 0 {
                    pieces.push(Piece::Literal(&rest[..at]));
                }
                pieces.push(piece);
                rest = &rest[at + len..];
            }
            None => {
                pieces.push(Piece::Literal(rest));
                rest = "";
            }
        }
    }
    pieces
}

/// Whether `text` looks like an RFC 3339 timestamp (a guide's example time stands for
/// any time).
fn is_timestamp(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() >= 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && (text.ends_with('Z') || text[19..].contains(['+', '-']))
}

/// Matches `text` against a string pattern; answers the placeholders' values.
pub fn glob_match(glob: &str, text: &str) -> Option<Vec<(String, String)>> {
    if is_timestamp(glob) {
        return is_timestamp(text).then(Vec::new);
    }
    let pieces = pieces(glob);
    let mut captures = Vec::new();
    matches_from(&pieces, text, &mut captures).then_some(captures)
}

fn matches_from(pieces: &[Piece], text: &str, captures: &mut Vec<(String, String)>) -> bool {
    match pieces.split_first() {
        None => text.is_empty(),
        Some((Piece::Literal(literal), rest)) => {
            text.starts_with(literal) && matches_from(rest, &text[literal.len()..], captures)
        }
        Some((wild, rest)) => {
            // A wildcard or a kept value takes the shortest text that lets the rest match
            // (at least one character for a kept value).
            let minimum = usize::from(matches!(wild, Piece::Keep(_)));
            for (end, _) in text.char_indices().chain([(text.len(), ' ')]) {
                if end < minimum {
                    continue;
                }
                let mark = captures.len();
                if let Piece::Keep(name) = wild {
                    captures.push((name.to_string(), text[..end].to_string()));
                }
                if matches_from(rest, &text[end..], captures) {
                    return true;
                }
                captures.truncate(mark);
            }
            false
        }
    }
}

/// The string leaves of a pattern with their paths, for `NAME=<placeholder>` lines.
pub fn string_leaves<'a>(
    pattern: &'a Pattern,
    path: Vec<PathStep>,
    out: &mut Vec<(Vec<PathStep>, &'a str)>,
) {
    match pattern {
        Pattern::String(s) => out.push((path, s)),
        Pattern::Object { members, .. } => {
            for (key, member) in members {
                let mut next = path.clone();
                next.push(PathStep::Key(key.clone()));
                string_leaves(member, next, out);
            }
        }
        Pattern::Array { items, .. } => {
            for (i, item) in items.iter().enumerate() {
                let mut next = path.clone();
                next.push(PathStep::Index(i));
                string_leaves(item, next, out);
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum PathStep {
    Key(String),
    Index(usize),
}

pub fn at_path<'a>(value: &'a Value, path: &[PathStep]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, step| match step {
        PathStep::Key(k) => v.get(k),
        PathStep::Index(i) => v.get(i),
    })
}

/// The text of a string pattern before its first wildcard or placeholder.
pub fn literal_prefix(glob: &str) -> &str {
    match pieces(glob).first() {
        Some(Piece::Literal(l)) => l,
        _ => "",
    }
}

/// Which value of the answer a `NAME=<placeholder>` line copies: the one string the guide
/// showed with the same placeholder, or else with the same text before its `...`.
pub fn bound_value<'a>(
    pattern: &Pattern,
    actual: &'a Value,
    placeholder: &str,
) -> Result<&'a Value, String> {
    let mut leaves = Vec::new();
    string_leaves(pattern, Vec::new(), &mut leaves);
    let same: Vec<_> = leaves.iter().filter(|(_, s)| *s == placeholder).collect();
    let candidates: Vec<_> = if same.len() == 1 {
        same
    } else {
        let prefix = literal_prefix(placeholder);
        leaves
            .iter()
            .filter(|(_, s)| !prefix.is_empty() && literal_prefix(s) == prefix)
            .collect()
    };
    match candidates.as_slice() {
        [(path, _)] => at_path(actual, path)
            .ok_or_else(|| format!("the answer has no value where the guide shows {placeholder}")),
        [] => Err(format!(
            "the answer before shows no value like {placeholder}"
        )),
        _ => Err(format!(
            "the answer before shows several values like {placeholder}"
        )),
    }
}

/// What one shell step did.
#[derive(Debug)]
pub struct Ran {
    pub exit: i32,
    pub stdout: String,
    pub stderr: String,
    /// The final status of each HTTP exchange `curl` made (1xx left out).
    pub statuses: Vec<u16>,
}

/// One `bash` that runs a reader's steps in order, so that variables, arrays and files
/// carry over as in a terminal. `curl` is wrapped to record each answer's status line.
pub struct Shell {
    _child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    dir: std::path::PathBuf,
    steps: usize,
}

const STEP_DONE: &str = "~guide step done";

impl Shell {
    /// A shell working in `dir` (the reader's files are there).
    pub async fn start(dir: &std::path::Path) -> Shell {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new("bash")
            .args(["--noprofile", "--norc"])
            .current_dir(dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("bash starts");
        let stdin = child.stdin.take().expect("bash's stdin");
        let stdout = tokio::io::BufReader::new(child.stdout.take().expect("bash's stdout")).lines();
        let mut shell = Shell {
            _child: child,
            stdin,
            stdout,
            dir: dir.to_path_buf(),
            steps: 0,
        };
        let headers = dir.join("~headers");
        let wrapper = format!(
            "curl() {{ command curl -D '{h}.one' \"$@\"; local rc=$?; \
             cat '{h}.one' >> '{h}' 2>/dev/null; rm -f '{h}.one'; return $rc; }}",
            h = headers.display()
        );
        let ran = shell.run(&wrapper, std::time::Duration::from_secs(5)).await;
        assert_eq!(ran.exit, 0, "the curl wrapper: {ran:?}");
        shell
    }

    /// Runs `text` as the reader would type it; answers what it did.
    pub async fn run(&mut self, text: &str, limit: std::time::Duration) -> Ran {
        use tokio::io::AsyncWriteExt;
        self.steps += 1;
        let n = self.steps;
        let file = |name: &str| self.dir.join(format!("~{name}-{n}"));
        let (script, out, err) = (file("step"), file("out"), file("err"));
        let headers = self.dir.join("~headers");
        std::fs::write(&script, text).expect("write the step");
        let _ = std::fs::remove_file(&headers);
        let line = format!(
            ". '{}' > '{}' 2> '{}' < /dev/null; echo \"{STEP_DONE} $?\"\n",
            script.display(),
            out.display(),
            err.display()
        );
        self.stdin
            .write_all(line.as_bytes())
            .await
            .expect("send a step to bash");
        self.stdin.flush().await.expect("send a step to bash");
        let exit = tokio::time::timeout(limit, async {
            loop {
                let line = self
                    .stdout
                    .next_line()
                    .await
                    .expect("read bash")
                    .expect("bash ended");
                if let Some(code) = line.strip_prefix(STEP_DONE) {
                    return code.trim().parse::<i32>().unwrap_or(-1);
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the step did not end within {limit:?}: {text}"));
        let read = |path: &std::path::Path| {
            String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned()
        };
        let statuses = read(&headers)
            .lines()
            .filter(|l| l.starts_with("HTTP/"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u16>().ok())
            .filter(|code| *code >= 200)
            .collect();
        Ran {
            exit,
            stdout: read(&out),
            stderr: read(&err),
            statuses,
        }
    }

    /// Sets a shell variable to `value` (quoted as it is).
    pub async fn set(&mut self, name: &str, value: &str) {
        let quoted = format!("'{}'", value.replace('\'', "'\\''"));
        let ran = self
            .run(
                &format!("{name}={quoted}"),
                std::time::Duration::from_secs(5),
            )
            .await;
        assert_eq!(ran.exit, 0, "set {name}: {ran:?}");
    }

    /// A shell variable's value.
    pub async fn get(&mut self, name: &str) -> String {
        let ran = self
            .run(
                &format!("printf '%s' \"${{{name}}}\""),
                std::time::Duration::from_secs(5),
            )
            .await;
        ran.stdout
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_skimmed_answer_parses_and_checks() {
        let e = expectation(
            r#"201 {"id":"<upload>","partSize":8388608,"missing":[1,...],"user":{...},...}"#,
        )
        .unwrap();
        assert_eq!(e.status, Some(201));
        let ExpectedBody::Json(p) = e.body else {
            panic!()
        };
        let mut kept = Kept::new();
        let answer =
            json!({"id": "u-1", "partSize": 8388608, "missing": [1, 2], "user": {"a": 1}, "x": 2});
        check(&p, &answer, "", &mut kept).unwrap();
        assert_eq!(kept["upload"], "u-1");
        let wrong = json!({"id": "u-1", "partSize": 1, "missing": [1], "user": {}});
        assert!(check(&p, &wrong, "", &mut Kept::new()).is_err());
    }

    #[test]
    fn a_closed_object_must_have_exactly_its_fields() {
        let ExpectedBody::Json(p) = expectation(r#"{"a":"pk_..."}"#).unwrap().body else {
            panic!()
        };
        assert!(check(&p, &json!({"a": "pk_1"}), "", &mut Kept::new()).is_ok());
        assert!(check(&p, &json!({"a": "pk_1", "b": 1}), "", &mut Kept::new()).is_err());
        assert!(check(&p, &json!({"a": "sk_1"}), "", &mut Kept::new()).is_err());
    }

    #[test]
    fn string_patterns_keep_values_and_times_stand_for_times() {
        assert_eq!(
            glob_match("rtmp://h/live/<key>", "rtmp://h/live/abc"),
            Some(vec![("key".into(), "abc".into())])
        );
        assert_eq!(glob_match("…xxxx", "…xxxx"), Some(vec![]));
        assert!(glob_match("2026-11-24T22:31:05Z", "2027-01-01T00:00:00.123Z").is_some());
        assert!(glob_match("pending", "active").is_none());
    }

    #[test]
    fn a_bind_line_finds_its_value() {
        let ExpectedBody::Json(p) =
            expectation(r#"{"apiKey":"pk_...","secretKey":"sk_...","user":{"id":"<bob's id>"}}"#)
                .unwrap()
                .body
        else {
            panic!()
        };
        let answer = json!({"apiKey": "pk_1", "secretKey": "sk_2", "user": {"id": "b"}});
        assert_eq!(bound_value(&p, &answer, "pk_...").unwrap(), "pk_1");
        assert_eq!(bound_value(&p, &answer, "<bob's id>").unwrap(), "b");
        assert!(bound_value(&p, &answer, "...").is_err());
    }

    #[test]
    fn shell_blocks_split_into_commands_answers_and_copies() {
        let block = Block {
            path: "x.md".into(),
            line: 1,
            lang: "sh".into(),
            lines: [
                "curl -s $B/a -d '{",
                "  \"x\": 1 }'",
                "# -> {\"token\":\"eyJ...\",",
                "#     \"n\":1}",
                "TOKEN=eyJ...",
                "curl -s $B/b  # -> 204",
                "for n in 1 2; do",
                "  echo $n",
                "done",
            ]
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 2, l.to_string()))
            .collect(),
        };
        let steps = steps(&block);
        assert_eq!(steps.len(), 6, "{steps:?}");
        assert!(matches!(&steps[1], Step::Expect { text, .. } if text.contains("\"n\":1}")));
        assert!(matches!(&steps[2], Step::Bind { name, .. } if name == "TOKEN"));
        assert!(matches!(&steps[4], Step::Expect { text, .. } if text == "204"));
        assert!(matches!(&steps[5], Step::Command { text, .. } if text.ends_with("done")));
    }
}
