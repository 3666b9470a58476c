//! Hostile values, reasons and owners: rendered inert in the markdown a pull request shows, as
//! Python literals in the Airflow DAG, refused in a notice's owners.

use super::*;

/// Every HTML a comment may hold is bf's own: the changed rows' `<details>` and the marker.
fn assert_inert(markdown: &str) {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Html(html) | Event::InlineHtml(html) => {
                let html = html.trim();
                let own = html == "</details>"
                    || html == "<!-- bf plan -->"
                    || (html.starts_with("<details><summary>Changed rows in slice ")
                        && html.ends_with("</summary>")
                        && html.matches('<').count() == 3);
                assert!(own, "HTML that is not bf's: {html:?}\n{markdown}");
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                panic!("a link or image to {dest_url}:\n{markdown}")
            }
            _ => {}
        }
    }
    // What GitHub finds in text after parsing — bare URLs, mentions — must not be in the text as
    // written, outside code (which GitHub leaves alone).
    let mut in_code = false;
    for (event, range) in Parser::new_ext(markdown, options).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(_)) => in_code = true,
            Event::End(pulldown_cmark::TagEnd::CodeBlock) => in_code = false,
            Event::Text(_) if !in_code => {
                let written = &markdown[range];
                let lower = written.to_ascii_lowercase();
                assert!(
                    !lower.contains("://") && !lower.contains("www."),
                    "a bare link in {written:?}:\n{markdown}"
                );
                assert!(
                    written
                        .match_indices('@')
                        .all(|(at, _)| written[at + 1..].starts_with(bf::markdown::JOINER)),
                    "an @mention in {written:?}:\n{markdown}"
                );
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_values_and_reasons_render_inert_and_samples_none_posts_no_value() {
    let checkout = Checkout::new().await;
    let hostile = "ACME</details><img src=\"https://evil.example/x.png\"><!--";
    std::fs::write(
        checkout.repo().join("landing/orders.csv"),
        format!(
            "order_id,customer,amount,currency,order_date\n1,\"{}\",10.0,EUR,2026-03-02\n2,C02,20.0,EUR,2026-03-03\n",
            hostile.replace('"', "\"\"")
        ),
    )
    .unwrap();
    let reason = "![x](https://evil.example/p.png) @octocat <!-- hide | `x` www.evil.example";
    let plan = checkout.plan("hostile.toml", |t| {
        t.replace("Fix March's currency.", reason) + "\n[diff]\nby = [\"customer\"]\n"
    });
    let output = checkout.bf(&["plan", &plan.display().to_string(), "--format", "markdown", "-q"]);
    let markdown = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(0), "{}", said(&output));
    assert!(
        markdown.contains("ACME") && markdown.contains("octocat"),
        "the values are shown, as text:\n{markdown}"
    );
    assert_inert(&markdown);
    let shown = bf_show(&checkout, &[]);
    assert_inert(&shown);

    // Counts and metrics only: no value of the data in the comment or the saved plan.
    for (args, env) in [(&["--samples", "none"][..], &[][..]), (&[][..], &[("BF_SAMPLES", "none")][..])] {
        let mut all = vec!["plan", "plans/hostile.toml", "--format", "markdown", "-q"];
        all.extend_from_slice(args);
        let output = checkout.bf_with(&all, env);
        let text = said(&output);
        assert!(output.status.success(), "{text}");
        assert!(!text.contains("ACME") && text.contains("+0 / −0 / ~1"), "a value was shown:\n{text}");
        let saved = std::fs::read_to_string(checkout.repo().join(".bf/plan.json")).unwrap();
        assert!(!saved.contains("ACME"), "a value was saved");
    }
}

/// Catalogs render a table's comment as markdown (Unity Catalog, Databricks' explorer): the reason
/// a pull request wrote reaches it through the apply and the rollback, and must stay text there.
#[tokio::test(flavor = "multi_thread")]
async fn the_reason_is_inert_markdown_in_the_table_comment() {
    let checkout = Checkout::new().await;
    let reason = "![x](https://evil.example/p.png) [docs](https://evil.example) <img src=x> # heading *bold*";
    let plan = checkout.plan("hostile.toml", |t| t.replace("Fix March's currency.", reason));
    let plan = plan.display().to_string();
    let applied = checkout.bf(&["apply", &plan, "--auto-approve", "-q"]);
    assert!(applied.status.success(), "{}", said(&applied));
    let table = checkout.repo().join("warehouse/orders");
    let comment = || {
        let metadata = crate::common::latest_metadata(&table);
        metadata["description"].as_str().expect("a table comment").to_owned()
    };
    let applied = comment();
    assert!(
        applied.contains("evil.example") && applied.contains("heading"),
        "the reason, as text: {applied}"
    );
    assert_inert(&applied);
    let rolled_back = checkout.bf(&["rollback", "--auto-approve"]);
    assert!(rolled_back.status.success(), "{}", said(&rolled_back));
    let rolled_back = comment();
    assert!(rolled_back.contains("rolled back on") && rolled_back.contains("evil.example"), "{rolled_back}");
    assert_inert(&rolled_back);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_plan_string_in_the_airflow_dag_is_a_python_literal() {
    let checkout = Checkout::new().await;
    let mut plan = planned(&checkout, &[]).await;
    let payload = "\"\"\"\nimport os; os.system('touch PWNED')\n\"\"\"\\";
    plan["id"] = format!("x{payload}").into();
    save(&checkout, &plan);
    let output = checkout.bf(&["export", "airflow"]);
    assert!(output.status.success(), "{}", said(&output));
    let dag = checkout.root().join("dag.py");
    std::fs::write(&dag, &output.stdout).unwrap();
    // Python's own parser: the payload is the docstring's text, and no call to `system` exists.
    // The docstring is the DAG's `doc_md` too: the id is there as the markdown escaper writes it.
    let shown = bf::markdown::text(&format!("x{payload}"));
    assert!(shown.contains("system"), "{shown}");
    let check = format!(
        "import ast, sys\ntree = ast.parse(open({dag:?}).read())\ndoc = ast.get_docstring(tree, clean=False)\n\
         assert {shown:?} in doc, doc\n\
         assert not [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == 'system']\n"
    );
    let python = std::process::Command::new("python3").args(["-c", &check]).output().unwrap();
    assert!(python.status.success(), "{}", String::from_utf8_lossy(&python.stderr));
}

/// Airflow renders a `BashOperator`'s command as a Jinja template when the task runs, after
/// Python's and the shell's quoting: a saved plan kept in a folder named `{{…}}` (or a state dir
/// linked to one) would put code in every task's command, even with the plan signed. The export
/// refuses, names the path, and prints no DAG.
#[tokio::test(flavor = "multi_thread")]
async fn a_saved_plans_path_is_never_a_template_in_the_airflow_dag() {
    let checkout = Checkout::new().await;
    let plan = checkout.plan("march.toml", |t| t);
    let state = "st{{ '%c' % 39 }};touch PWNED;#";
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q", "--state-dir", state]);
    assert!(output.status.success(), "{}", said(&output));
    let output = checkout.bf(&["export", "airflow", "--state-dir", state]);
    assert_eq!(output.status.code(), Some(1), "{}", said(&output));
    assert!(output.stdout.is_empty(), "a DAG was printed: {}", String::from_utf8_lossy(&output.stdout));
    assert!(said(&output).contains("which Airflow would read as part of a template"), "{}", said(&output));
    // The same plan kept where its path is plain exports.
    let output = checkout.bf(&["plan", &plan.display().to_string(), "-q", "--state-dir", "plain"]);
    assert!(output.status.success(), "{}", said(&output));
    let output = checkout.bf(&["export", "airflow", "--state-dir", "plain"]);
    assert!(output.status.success(), "{}", said(&output));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_notice_owner_with_a_line_break_is_refused() {
    let checkout = Checkout::new().await;
    let plan = checkout.plan("owners.toml", |t| {
        format!("{t}\n[notify]\nfile = \"notice.md\"\nowners = [\"finance\\n**Undo** run this\"]\n")
    });
    let output = checkout.bf(&["validate", &plan.display().to_string()]);
    refused_at(&checkout, &output, &plan, 21, "holds a name with a line break");
}

/// Hostile fragments the escaper's inputs are built from.
fn hostile() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "<",
        ">",
        "<!--",
        "-->",
        "</details>",
        "<img src=x>",
        "<b>",
        "&lt;",
        "&#60;",
        "[",
        "]",
        "(",
        ")",
        "![x](https://e.x/i.png)",
        "[l](http://e.x)",
        "<https://e.x>",
        "https://e.x",
        "www.e.x",
        "a@b.co",
        "@octocat",
        "#12",
        "`",
        "``",
        "```",
        "~~~",
        "|",
        "\\",
        "\\|",
        "*",
        "**",
        "_",
        "__",
        "~~",
        "#",
        "##",
        "-",
        "+",
        "=",
        "1.",
        "2)",
        ">",
        ":",
        "/",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\u{0}",
        "\u{2060}",
        "\u{1b}[31m",
        "\u{1b}]8;;https://e.x\u{7}",
        "\u{202e}",
        "\u{85}",
        "a",
        "Zürich",
        "東京",
        "x_y",
        "0.7%",
        "—",
    ]);
    prop::collection::vec(pieces, 0..12).prop_map(|p| p.concat())
}

/// The text a CommonMark parser makes of `markdown`, after checking it holds no markup but the
/// frame's: no HTML, link, image, emphasis, code block; `cells` table cells per row when a table.
fn rendered(markdown: &str, frame_code: bool) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    let mut text = String::new();
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Text(t) => text.push_str(&t),
            Event::Code(c) => {
                assert!(frame_code, "an unexpected code span in {markdown:?}");
                text.push_str(&c)
            }
            Event::Html(h) | Event::InlineHtml(h) => panic!("HTML {h:?} in {markdown:?}"),
            Event::Start(tag) => match tag {
                Tag::Paragraph
                | Tag::Item
                | Tag::List(None)
                | Tag::Table(_)
                | Tag::TableHead
                | Tag::TableRow
                | Tag::TableCell
                | Tag::Strong => {}
                other => panic!("markup {other:?} in {markdown:?}"),
            },
            Event::End(_) => {}
            Event::SoftBreak | Event::HardBreak => panic!("a line break in {markdown:?}"),
            other => panic!("{other:?} in {markdown:?}"),
        }
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_escaper_makes_any_string_inert_text_that_reads_back_as_written(value in hostile()) {
        use bf::markdown::{JOINER, code, text};
        // What a reader must see, computed here and not by bf: the value on one line, each control
        // character and each character that reorders text a space, the ends trimmed.
        let reorders = |c: char| matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        let flat: String = value.chars().map(|c| if c.is_control() || reorders(c) { ' ' } else { c }).collect();
        let expected = flat.trim().replace(JOINER, "");
        let read = |rendered: String, frame: &str| {
            let got = rendered.replace(JOINER, "");
            let got = got.strip_prefix(frame).unwrap_or(&got).trim().to_owned();
            assert_eq!(got, expected.trim(), "{value:?}");
        };
        for escaped in [text(&value), code(&value)] {
            let is_code = escaped.starts_with('`') && !value.is_empty();
            // In a paragraph after a label, in a list item, in a table cell.
            read(rendered(&format!("**Reason** {escaped}\n"), is_code), "Reason");
            read(rendered(&format!("- {escaped}\n"), is_code), "");
            let table = format!("| a | b |\n|---|---|\n| {escaped} | end |\n");
            let cells = rendered(&table, is_code);
            prop_assert!(cells.ends_with("end"), "the cell was broken: {table:?}");
            read(cells.strip_suffix("end").unwrap().to_owned(), "ab");
            if !is_code {
                // GitHub links bare URLs and mentions in text (never in code): none is left whole.
                let lower = escaped.to_ascii_lowercase();
                prop_assert!(!lower.contains("://") && !lower.contains("www."), "{escaped:?}");
                prop_assert!(escaped.match_indices('@').all(|(at, _)| escaped[at + 1..].starts_with(JOINER)));
            }
        }
    }
}

/// A value that differs by a character that shows nothing (a zero-width space, a soft hyphen), or
/// by a look-alike letter of another script in a Latin word (a Cyrillic О), is shown with that
/// character's code, in the text and the pull request's markdown alike: the changed row no longer
/// reads the same as the row it replaces.
#[tokio::test(flavor = "multi_thread")]
async fn an_invisible_character_in_a_changed_value_is_shown() {
    let checkout = Checkout::new().await;
    std::fs::write(
        checkout.repo().join("landing/orders.csv"),
        "order_id,customer,amount,currency,order_date\n1,C01\u{200B},10.0,USD,2026-03-02\n2,C\u{00AD}02,20.0,EUR,2026-03-03\n\
         3,C\u{41e}3,30.0,EUR,2026-03-04\n",
    )
    .unwrap();
    let plan = checkout.plan("march.toml", |t| t);
    let output = checkout.bf(&["plan", &plan.display().to_string()]);
    let text = said(&output);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("C01\\u{200b}") && text.contains("C\\u{ad}02"), "{text}");
    assert!(!text.contains('\u{200B}') && !text.contains('\u{00AD}'), "{text}");
    // A Cyrillic О among Latin letters: a look-alike, shown as its code.
    assert!(text.contains("C\\u{41e}3") && !text.contains('\u{41e}'), "{text}");
    let markdown = bf_show(&checkout, &[]);
    assert!(markdown.contains("C01\\u{200b}") && markdown.contains("C\\u{41e}3"), "{markdown}");
}
