//! The parser's tests: hand-written inputs and every kernel's format
//! files in `testdata/formats/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[test]
fn symbolic_values_are_read_from_the_print_format() {
    let text = "name: mm_compaction_end\nformat:\n\tfield:int status;\toffset:44;\tsize:4;\tsigned:1;\n\n\
        print fmt: \"mode=%s status=%s\", REC->sync ? \"sync\" : \"async\", \
        __print_symbolic(REC->status, {1, \"skipped\"}, {0x8, \"success\"}, {0, \"not_suitable_zone\"})\n";
    let syms = print_symbols(text, "status");
    assert_eq!(
        syms,
        [
            (1, "skipped".to_string()),
            (8, "success".to_string()),
            (0, "not_suitable_zone".to_string())
        ]
    );
    assert!(print_symbols(text, "sync").is_empty());
    assert!(print_symbols("garbage", "status").is_empty());
    assert!(print_symbols("print fmt: __print_symbolic(REC->status, {1", "status").is_empty());
}

macro_rules! fixture {
    ($path:literal) => {
        ($path, include_str!(concat!("../testdata/formats/", $path)))
    };
}

/// Every fixture, copied and reconstructed.
const FIXTURES: &[(&str, &str)] = &[
    fixture!("6.18-x86_64/page_fault_user.format"),
    fixture!("6.18-x86_64/sched_process_fork.format"),
    fixture!("6.18-x86_64/sched_process_exit.format"),
    fixture!("6.18-x86_64/sched_process_exec.format"),
    fixture!("6.18-x86_64/tlb_flush.format"),
    fixture!("6.18-x86_64/rss_stat.format"),
    fixture!("6.18-x86_64/mm_vmscan_direct_reclaim_begin.format"),
    fixture!("6.18-x86_64/mm_vmscan_direct_reclaim_end.format"),
    fixture!("6.18-x86_64/mm_vmscan_memcg_reclaim_begin.format"),
    fixture!("6.18-x86_64/mm_vmscan_lru_shrink_inactive.format"),
    fixture!("6.18-x86_64/mm_vmscan_write_folio.format"),
    fixture!("6.18-x86_64/mm_vmscan_kswapd_wake.format"),
    fixture!("6.18-x86_64/sys_enter_madvise.format"),
    fixture!("6.18-x86_64/sys_exit_madvise.format"),
    fixture!("6.1-x86_64/sched_process_fork.format"),
    fixture!("5.15-x86_64/sched_process_fork.format"),
    fixture!("5.15-x86_64/sched_process_exit.format"),
    fixture!("5.15-x86_64/mm_vmscan_writepage.format"),
    fixture!("5.15-arm64/sched_process_fork.format"),
    fixture!("5.10-x86_64/rss_stat.format"),
    fixture!("5.10-armv7/rss_stat.format"),
    fixture!("2.6.31-x86/sched_wakeup.format"),
];

fn load(path: &str) -> EventFormat {
    let (_, text) = FIXTURES
        .iter()
        .find(|(p, _)| *p == path)
        .unwrap_or_else(|| panic!("no fixture {path}"));
    EventFormat::parse(text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// (name, offset, size, signed) of the non-common fields, for compact checks.
fn layout(ev: &EventFormat) -> Vec<(&str, u32, u32, bool)> {
    ev.event_fields()
        .map(|f| (f.name.as_str(), f.offset, f.size, f.signed))
        .collect()
}

fn assert_common_header(ev: &EventFormat) {
    let common: Vec<_> = ev
        .fields
        .iter()
        .take(4)
        .map(|f| {
            (
                f.name.as_str(),
                f.c_type.as_str(),
                f.offset,
                f.size,
                f.signed,
            )
        })
        .collect();
    assert_eq!(
        common,
        [
            ("common_type", "unsigned short", 0, 2, false),
            ("common_flags", "unsigned char", 2, 1, false),
            ("common_preempt_count", "unsigned char", 3, 1, false),
            ("common_pid", "int", 4, 4, true),
        ],
        "{}",
        ev.name
    );
}

#[test]
fn every_fixture_parses_with_sane_fields() {
    for (path, text) in FIXTURES {
        let ev = EventFormat::parse(text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let stem = path
            .rsplit('/')
            .next()
            .and_then(|f| f.strip_suffix(".format"))
            .unwrap();
        assert_eq!(ev.name, stem, "{path}");
        assert!(ev.id.is_some(), "{path}");
        assert!(ev.event_fields().count() > 0, "{path}");
        for f in &ev.fields {
            assert!(f.size > 0, "{path}: {}", f.name);
            assert!(f.offset.checked_add(f.size).is_some(), "{path}: {}", f.name);
        }
        if !path.starts_with("2.6.31") {
            assert_common_header(&ev);
        }
    }
}

#[test]
fn page_fault_user_6_18() {
    let ev = load("6.18-x86_64/page_fault_user.format");
    assert_eq!(ev.name, "page_fault_user");
    assert_eq!(ev.id, Some(190));
    assert_eq!(ev.fields.len(), 7);
    assert_eq!(
        layout(&ev),
        [
            ("address", 8, 8, false),
            ("ip", 16, 8, false),
            ("error_code", 24, 8, false),
        ]
    );
    let address = ev.int_field("address", &[8]).unwrap();
    assert_eq!(address.c_type, "unsigned long");
    assert!(address.is_scalar());
    assert_eq!(address.end(), 16);
    assert_eq!(ev.int_field("error_code", &[4, 8]).unwrap().offset, 24);
    assert_eq!(ev.int_field("common_pid", &[4]).unwrap().offset, 4);
}

#[test]
fn sched_events_6_18() {
    let fork = load("6.18-x86_64/sched_process_fork.format");
    assert_eq!(
        layout(&fork),
        [
            ("parent_comm", 8, 4, false),
            ("parent_pid", 12, 4, true),
            ("child_comm", 16, 4, false),
            ("child_pid", 20, 4, true),
        ]
    );
    let comm = fork.field("parent_comm").unwrap();
    assert!(comm.data_loc);
    assert_eq!(comm.c_type, "__data_loc char[]");
    assert_eq!(comm.array_len, None);
    assert_eq!(fork.field("child_pid").unwrap().c_type, "pid_t");

    let exit = load("6.18-x86_64/sched_process_exit.format");
    assert_eq!(
        layout(&exit),
        [
            ("comm", 8, 16, false),
            ("pid", 24, 4, true),
            ("prio", 28, 4, true),
            ("group_dead", 32, 1, false),
        ]
    );
    let comm = exit.field("comm").unwrap();
    assert_eq!(comm.c_type, "char");
    assert_eq!(comm.array_len, Some(16));
    assert!(!comm.data_loc);
    assert_eq!(exit.field("group_dead").unwrap().c_type, "bool");

    let exec = load("6.18-x86_64/sched_process_exec.format");
    assert_eq!(
        layout(&exec),
        [
            ("filename", 8, 4, false),
            ("pid", 12, 4, true),
            ("old_pid", 16, 4, true),
        ]
    );
    assert!(exec.field("filename").unwrap().data_loc);
}

#[test]
fn mm_events_6_18() {
    let tlb = load("6.18-x86_64/tlb_flush.format");
    assert_eq!(
        layout(&tlb),
        [("reason", 8, 4, true), ("pages", 16, 8, false)]
    );

    let rss = load("6.18-x86_64/rss_stat.format");
    assert_eq!(
        layout(&rss),
        [
            ("mm_id", 8, 4, false),
            ("curr", 12, 4, false),
            ("member", 16, 4, true),
            ("size", 24, 8, true),
        ]
    );
    assert_eq!(rss.field("size").unwrap().c_type, "long");
    assert_eq!(rss.field("mm_id").unwrap().c_type, "unsigned int");

    let begin = load("6.18-x86_64/mm_vmscan_direct_reclaim_begin.format");
    assert_eq!(
        layout(&begin),
        [("order", 8, 4, true), ("gfp_flags", 16, 8, false)]
    );
    let memcg = load("6.18-x86_64/mm_vmscan_memcg_reclaim_begin.format");
    assert_eq!(layout(&memcg), layout(&begin));
    let end = load("6.18-x86_64/mm_vmscan_direct_reclaim_end.format");
    assert_eq!(layout(&end), [("nr_reclaimed", 8, 8, false)]);

    let shrink = load("6.18-x86_64/mm_vmscan_lru_shrink_inactive.format");
    assert_eq!(shrink.event_fields().count(), 13);
    assert_eq!(shrink.int_field("nr_scanned", &[8]).unwrap().offset, 16);
    assert_eq!(shrink.int_field("nr_reclaimed", &[8]).unwrap().offset, 24);
    assert_eq!(shrink.int_field("nr_activate1", &[4]).unwrap().offset, 68);
    assert_eq!(shrink.int_field("reclaim_flags", &[4]).unwrap().offset, 92);

    let write = load("6.18-x86_64/mm_vmscan_write_folio.format");
    assert_eq!(
        layout(&write),
        [("pfn", 8, 8, false), ("reclaim_flags", 16, 4, true)]
    );

    let kswapd = load("6.18-x86_64/mm_vmscan_kswapd_wake.format");
    assert_eq!(
        layout(&kswapd),
        [
            ("nid", 8, 4, true),
            ("zid", 12, 4, true),
            ("order", 16, 4, true)
        ]
    );
}

#[test]
fn madvise_syscalls_6_18() {
    let enter = load("6.18-x86_64/sys_enter_madvise.format");
    assert_eq!(
        layout(&enter),
        [
            ("__syscall_nr", 8, 4, true),
            ("start", 16, 8, false),
            ("len_in", 24, 8, false),
            // Declared `int` but stored as a full 8-byte syscall argument.
            ("behavior", 32, 8, false),
        ]
    );
    assert_eq!(enter.field("behavior").unwrap().c_type, "int");
    assert_eq!(enter.field("len_in").unwrap().c_type, "size_t");

    let exit = load("6.18-x86_64/sys_exit_madvise.format");
    assert_eq!(
        layout(&exit),
        [("__syscall_nr", 8, 4, true), ("ret", 16, 8, true)]
    );
}

#[test]
fn fork_child_pid_moves_between_kernels() {
    let new = load("6.18-x86_64/sched_process_fork.format");
    let old = load("5.15-x86_64/sched_process_fork.format");
    assert_eq!(new.int_field("child_pid", &[4]).unwrap().offset, 20);
    assert_eq!(old.int_field("child_pid", &[4]).unwrap().offset, 44);
    assert_eq!(new.int_field("parent_pid", &[4]).unwrap().offset, 12);
    assert_eq!(old.int_field("parent_pid", &[4]).unwrap().offset, 24);

    let comm = old.field("child_comm").unwrap();
    assert_eq!((comm.c_type.as_str(), comm.array_len), ("char", Some(16)));
    assert_eq!((comm.offset, comm.size), (28, 16));
    assert!(comm.signed, "x86 char was signed before 6.2");
    assert!(!comm.data_loc);
}

#[test]
fn fork_with_symbolic_comm_length() {
    let ev = load("6.1-x86_64/sched_process_fork.format");
    let comm = ev.field("parent_comm").unwrap();
    assert_eq!(comm.c_type, "char");
    assert_eq!(
        comm.array_len,
        Some(16),
        "derived from size 16 / sizeof(char)"
    );
    assert_eq!(ev.int_field("child_pid", &[4]).unwrap().offset, 44);
    let err = ev.int_field("child_comm", &[4]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "event sched_process_fork: field child_comm is an array (char[16]), expected an integer"
    );
}

#[test]
fn arm64_fork_differs_only_in_char_signedness() {
    let arm = load("5.15-arm64/sched_process_fork.format");
    let x86 = load("5.15-x86_64/sched_process_fork.format");
    let offsets = |ev: &EventFormat| -> Vec<(String, u32, u32)> {
        ev.fields
            .iter()
            .map(|f| (f.name.clone(), f.offset, f.size))
            .collect()
    };
    assert_eq!(offsets(&arm), offsets(&x86));
    assert!(!arm.field("parent_comm").unwrap().signed);
    assert!(x86.field("parent_comm").unwrap().signed);
    assert_eq!(arm.int_field("child_pid", &[4]).unwrap().offset, 44);
}

#[test]
fn exit_5_15_has_no_group_dead() {
    let ev = load("5.15-x86_64/sched_process_exit.format");
    assert_eq!(
        layout(&ev),
        [
            ("comm", 8, 16, true),
            ("pid", 24, 4, true),
            ("prio", 28, 4, true)
        ]
    );
    let err = ev.int_field("group_dead", &[1]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "event sched_process_exit: field group_dead not found (fields: comm, pid, prio)"
    );
}

#[test]
fn writepage_before_write_folio() {
    let old = load("5.15-x86_64/mm_vmscan_writepage.format");
    let new = load("6.18-x86_64/mm_vmscan_write_folio.format");
    assert_eq!(old.name, "mm_vmscan_writepage");
    assert_eq!(new.name, "mm_vmscan_write_folio");
    assert_eq!(layout(&old), layout(&new));
    assert_eq!(old.int_field("pfn", &[8]).unwrap().offset, 8);
    assert_eq!(old.int_field("reclaim_flags", &[4]).unwrap().offset, 16);
}

#[test]
fn rss_stat_across_versions_and_word_sizes() {
    let v5 = load("5.10-x86_64/rss_stat.format");
    let v6 = load("6.18-x86_64/rss_stat.format");
    assert_eq!(layout(&v5), layout(&v6));
    for ev in [&v5, &v6] {
        assert_eq!(ev.int_field("mm_id", &[4]).unwrap().offset, 8);
        assert_eq!(ev.int_field("curr", &[4]).unwrap().offset, 12);
        assert_eq!(ev.int_field("member", &[4]).unwrap().offset, 16);
        assert_eq!(ev.int_field("size", &[8]).unwrap().offset, 24);
    }

    let arm32 = load("5.10-armv7/rss_stat.format");
    let size = arm32.field("size").unwrap();
    assert_eq!((size.offset, size.size, size.signed), (20, 4, true));
    let err = arm32.int_field("size", &[8]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "event rss_stat: field size has size 4, expected one of [8]"
    );
    assert_eq!(err.event(), "rss_stat");
    assert_eq!(err.field(), "size");
    assert_eq!(
        err.kind(),
        &FieldErrorKind::WrongSize {
            size: 4,
            expected: vec![8]
        }
    );
    // A caller that accepts both word sizes gets the 32-bit offset.
    assert_eq!(arm32.int_field("size", &[4, 8]).unwrap().offset, 20);
}

#[test]
fn very_old_kernel_without_signed_attribute() {
    let ev = load("2.6.31-x86/sched_wakeup.format");
    assert_eq!(ev.id, Some(60));
    assert!(ev.fields.iter().all(|f| !f.signed));
    assert_eq!(ev.field("common_tgid").unwrap().offset, 8);
    assert!(ev.field("common_tgid").unwrap().is_common());
    let comm = ev.field("comm").unwrap();
    assert_eq!((comm.offset, comm.size, comm.array_len), (12, 16, Some(16)));
    assert_eq!(ev.int_field("pid", &[4]).unwrap().offset, 28);
    assert_eq!(ev.int_field("cpu", &[4]).unwrap().offset, 40);
}

#[test]
fn missing_field_error_names_event_and_field() {
    let ev = load("6.18-x86_64/page_fault_user.format");
    let err = ev.int_field("no_such_field", &[8]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "event page_fault_user: field no_such_field not found \
         (fields: address, ip, error_code)"
    );
    assert_eq!(err.event(), "page_fault_user");
    assert_eq!(err.field(), "no_such_field");
    assert!(matches!(err.kind(), FieldErrorKind::NotFound { available } if available.len() == 3));

    // The example from the module contract: error_code missing on some kernel.
    let text = "name: page_fault_user\nID: 1\nformat:\n\
                \tfield:unsigned long address;\toffset:8;\tsize:8;\tsigned:0;\n\
                \tfield:unsigned long ip;\toffset:16;\tsize:8;\tsigned:0;\n";
    let ev = EventFormat::parse(text).unwrap();
    assert_eq!(
        ev.int_field("error_code", &[8]).unwrap_err().to_string(),
        "event page_fault_user: field error_code not found (fields: address, ip)"
    );
}

#[test]
fn wrong_shape_errors() {
    let fork = load("6.18-x86_64/sched_process_fork.format");
    let err = fork.int_field("child_pid", &[8]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "event sched_process_fork: field child_pid has size 4, expected one of [8]"
    );
    let err = fork.int_field("child_comm", &[4]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "event sched_process_fork: field child_comm is a dynamic field \
         (__data_loc char[]), expected an integer"
    );
    let exit = load("6.18-x86_64/sched_process_exit.format");
    let err = exit.int_field("comm", &[16]).unwrap_err();
    assert!(
        matches!(err.kind(), FieldErrorKind::Array { len: 16, .. }),
        "{err}"
    );
    let err = exit.int_field("pid", &[]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "event sched_process_exit: field pid has size 4, expected one of []"
    );
}

#[test]
fn errors_are_single_line() {
    let ev = load("6.18-x86_64/sched_process_exit.format");
    let field_errors = [
        ev.int_field("nope\n\r\u{0}", &[4]).unwrap_err().to_string(),
        ev.int_field("comm", &[4]).unwrap_err().to_string(),
    ];
    let format_errors = [
        EventFormat::parse("").unwrap_err().to_string(),
        EventFormat::parse("name: x\nformat:\n\tfield:int\u{0}\n y;\toffset:1;size:1;")
            .unwrap_err()
            .to_string(),
        EventFormat::parse("name: x\n\tfield:int y;\toffset:\r\u{1b}[2J;\tsize:4;")
            .unwrap_err()
            .to_string(),
        EventFormat::parse(&format!(
            "name: x\n\tfield:int y;\toffset:{};\tsize:4;",
            "9".repeat(500)
        ))
        .unwrap_err()
        .to_string(),
    ];
    for msg in field_errors.iter().chain(&format_errors) {
        assert!(!msg.contains('\n') && !msg.contains('\r'), "{msg:?}");
        assert!(!msg.chars().any(char::is_control), "{msg:?}");
        assert!(msg.chars().count() < 200, "{msg:?}");
    }
}

#[test]
fn declarations_with_pointers_and_several_words() {
    let text = "name: demo\nID: 7\nformat:\n\
        \tfield:struct mm_struct * mm;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:const char * name;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:unsigned long long big;\toffset:24;\tsize:8;\tsigned:0;\n\
        \tfield:char *tight;\toffset:32;\tsize:8;\tsigned:0;\n\
        \tfield:__data_loc u64[] addrs;\toffset:40;\tsize:4;\tsigned:0;\n\
        \tfield:__rel_loc char[] rel;\toffset:44;\tsize:4;\tsigned:0;\n\
        \tfield:unsigned long caller[8];\toffset:48;\tsize:64;\tsigned:0;\n\
        \tfield:char buf[];\toffset:112;\tsize:0;\tsigned:0;\n";
    let ev = EventFormat::parse(text).unwrap();
    let types: Vec<_> = ev
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.c_type.as_str(), f.array_len, f.data_loc))
        .collect();
    assert_eq!(
        types,
        [
            ("mm", "struct mm_struct *", None, false),
            ("name", "const char *", None, false),
            ("big", "unsigned long long", None, false),
            ("tight", "char *", None, false),
            ("addrs", "__data_loc u64[]", None, true),
            ("rel", "__rel_loc char[]", None, true),
            ("caller", "unsigned long", Some(8), false),
            ("buf", "char", Some(0), false),
        ]
    );
    assert_eq!(ev.int_field("mm", &[8]).unwrap().offset, 8);
    assert!(ev.int_field("buf", &[1]).is_err());
}

#[test]
fn tolerated_variations() {
    let real = load("6.18-x86_64/page_fault_user.format");

    // CRLF line ends.
    let crlf = include_str!("../testdata/formats/6.18-x86_64/page_fault_user.format")
        .replace('\n', "\r\n");
    assert_eq!(EventFormat::parse(&crlf).unwrap(), real);

    // No trailing newline, extra blank lines and spaces, junk after print fmt.
    let text = "\n\nname:   page_fault_user  \n\nID:190\n  format:  \n\n\n\
        field:unsigned short common_type; offset:0; size:2; signed:0;\n\
        field:unsigned char common_flags;offset:2;size:1;signed:0\n\
        \t field: unsigned char common_preempt_count ;\toffset: 3 ;\tsize:1;\tsigned:0;;\n\
        field:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\tfuture:xyz;\n\
        field:unsigned long address;\toffset:8;\tsize:8;\tsigned:0;\n\
        \n\n\
        field:unsigned long ip;\toffset:16;\tsize:8;\tsigned:0;\n\
        field:unsigned long error_code;\toffset:24;\tsize:8;\tsigned:0;\n\
        print fmt: \"fields %d\", REC->x\n\
        field:this is not parsed;\n\
        \u{0}\u{1}binary junk\u{fffd}\n\
        name: ignored";
    assert_eq!(EventFormat::parse(text).unwrap(), real);

    // Old ftrace events spelled the prefix `field special:`.
    let special = "name: s\nfield special:int x;\toffset:8;\tsize:4;\n";
    let ev = EventFormat::parse(special).unwrap();
    assert_eq!(ev.fields[0].name, "x");
    assert_eq!(ev.id, None);
}

fn parse_err(text: &str) -> FormatError {
    match EventFormat::parse(text) {
        Ok(ev) => panic!("parsed {ev:?} from {text:?}"),
        Err(e) => e,
    }
}

#[test]
fn rejects_files_without_name_or_fields() {
    let err = parse_err("");
    assert_eq!(err.kind(), &FormatErrorKind::MissingName);
    assert_eq!(
        err.to_string(),
        "event format file: no `name:` line (not a format file?)"
    );
    assert_eq!(err.event(), None);

    let no_name = "ID: 5\nformat:\n\tfield:int x;\toffset:8;\tsize:4;\tsigned:1;\n";
    assert_eq!(parse_err(no_name).kind(), &FormatErrorKind::MissingName);

    let err = parse_err("name: lonely\nID: 5\nformat:\n\nprint fmt: \"\"\n");
    assert_eq!(err.kind(), &FormatErrorKind::NoFields);
    assert_eq!(err.to_string(), "event lonely: no `field:` lines");
    assert_eq!(err.event(), Some("lonely"));

    // Fields only after print fmt do not count.
    let err = parse_err("name: late\nprint fmt: \"\"\n\tfield:int x;\toffset:8;\tsize:4;\n");
    assert_eq!(err.kind(), &FormatErrorKind::NoFields);
}

#[test]
fn rejects_bad_headers() {
    assert!(matches!(
        parse_err("name:\n").kind(),
        FormatErrorKind::BadName { .. }
    ));
    assert!(matches!(
        parse_err("name: two words\n").kind(),
        FormatErrorKind::BadName { .. }
    ));
    let err = parse_err("name: a\nname: b\n");
    assert_eq!(err.to_string(), "event a: line 2: duplicate `name:` line");
    let err = parse_err("name: a\nID: x1\n");
    assert_eq!(err.to_string(), "event a: line 2: bad ID \"x1\"");
    assert!(matches!(
        parse_err("name: a\nID: -1\n").kind(),
        FormatErrorKind::BadId { .. }
    ));
    assert!(matches!(
        parse_err("name: a\nID: 4294967296\n").kind(),
        FormatErrorKind::BadId { .. }
    ));
    assert!(matches!(
        parse_err("name: a\nID: 1\nID: 1\n").kind(),
        FormatErrorKind::DuplicateHeader { key: "ID" }
    ));
}

#[test]
fn rejects_huge_offsets_and_sizes() {
    let err = parse_err(
        "name: big\nformat:\n\tfield:unsigned long address;\toffset:4294967295;\tsize:8;\tsigned:0;\n",
    );
    assert_eq!(
        err.kind(),
        &FormatErrorKind::OffsetOverflow {
            field: "address".into(),
            offset: u32::MAX,
            size: 8
        }
    );
    assert_eq!(
        err.to_string(),
        "event big: line 3: field address: offset 4294967295 + size 8 overflows u32"
    );

    let err = parse_err("name: big\n\tfield:long x;\toffset:99999999999;\tsize:8;\tsigned:1;\n");
    assert_eq!(
        err.to_string(),
        "event big: line 2: field x: bad `offset` value \"99999999999\""
    );
    let err = parse_err("name: big\n\tfield:long x;\toffset:8;\tsize:4294967296;\n");
    assert!(
        matches!(err.kind(), FormatErrorKind::BadAttribute { attribute, .. } if attribute == "size")
    );
    // offset + size exactly u32::MAX is still representable.
    let ok = "name: edge\n\tfield:char x;\toffset:4294967294;\tsize:1;\n";
    assert_eq!(EventFormat::parse(ok).unwrap().fields[0].end(), u32::MAX);
}

type KindCheck = fn(&FormatErrorKind) -> bool;

#[test]
fn rejects_malformed_field_lines() {
    let cases: &[(&str, KindCheck)] = &[
        ("\tfield:int x;\tsize:4;", |k| {
            matches!(
                k,
                FormatErrorKind::MissingAttribute {
                    attribute: "offset",
                    ..
                }
            )
        }),
        ("\tfield:int x;\toffset:8;", |k| {
            matches!(
                k,
                FormatErrorKind::MissingAttribute {
                    attribute: "size",
                    ..
                }
            )
        }),
        ("\tfield:int x;\toffset:8;\tsize:0;", |k| {
            matches!(k, FormatErrorKind::ZeroSize { .. })
        }),
        ("\tfield:int x;\toffset:-8;\tsize:4;", |k| {
            matches!(k, FormatErrorKind::BadAttribute { .. })
        }),
        ("\tfield:int x;\toffset:+8;\tsize:4;", |k| {
            matches!(k, FormatErrorKind::BadAttribute { .. })
        }),
        ("\tfield:int x;\toffset:0x8;\tsize:4;", |k| {
            matches!(k, FormatErrorKind::BadAttribute { .. })
        }),
        ("\tfield:int x;\toffset:8;\tsize:4;\tsigned:2;", |k| {
            matches!(k, FormatErrorKind::BadAttribute { .. })
        }),
        (
            "\tfield:int x;\toffset:8;\tsize:4;\tjunk;",
            |k| matches!(k, FormatErrorKind::BadAttribute { attribute, .. } if attribute.is_empty()),
        ),
        ("\tfield:int x;\toffset:8;\toffset:12;\tsize:4;", |k| {
            matches!(k, FormatErrorKind::DuplicateAttribute { .. })
        }),
        (
            "\tfield:int x;\toffset:8;\tsize:4;\tsigned:1;\tsigned:1;",
            |k| matches!(k, FormatErrorKind::DuplicateAttribute { .. }),
        ),
        ("\tfield:x;\toffset:8;\tsize:4;", |k| {
            matches!(k, FormatErrorKind::MalformedField { .. })
        }),
        ("\tfield:;\toffset:8;\tsize:4;", |k| {
            matches!(k, FormatErrorKind::MalformedField { .. })
        }),
        ("\tfield:int 9x;\toffset:8;\tsize:4;", |k| {
            matches!(k, FormatErrorKind::MalformedField { .. })
        }),
        ("\tfield:char comm[16;\toffset:8;\tsize:16;", |k| {
            matches!(k, FormatErrorKind::MalformedField { .. })
        }),
        ("\tfield:char comm16];\toffset:8;\tsize:16;", |k| {
            matches!(k, FormatErrorKind::MalformedField { .. })
        }),
        ("\tfield:char comm[1 6];\toffset:8;\tsize:16;", |k| {
            matches!(k, FormatErrorKind::MalformedField { .. })
        }),
        (
            "\tfield:int x;\toffset:8;\tsize:4;\n\tfield:int x;\toffset:12;\tsize:4;",
            |k| matches!(k, FormatErrorKind::DuplicateField { .. }),
        ),
    ];
    for (body, check) in cases {
        let text = format!("name: m\nformat:\n{body}\n");
        let err = parse_err(&text);
        assert!(check(err.kind()), "{body:?}: {err}");
        assert_eq!(err.event(), Some("m"), "{body:?}");
        assert!(err.line().is_some(), "{body:?}");
    }
    let err = parse_err("name: m\n\tfield:int x;\toffset:8;\tsize:4;\tjunk here;\n");
    assert_eq!(
        err.to_string(),
        "event m: line 2: field x: unexpected text \"junk here\" (expected `key:value`)"
    );
}

#[test]
fn garbage_and_binary_input_is_an_error() {
    let inputs: Vec<String> = vec![
        String::new(),
        "\n\n\n".into(),
        "\r\n".into(),
        "hello world".into(),
        "name".into(),
        "name:".into(),
        "field:int x;\toffset:8;\tsize:4;".into(),
        "print fmt: \"name: x\"".into(),
        "\u{0}".repeat(64),
        String::from_utf8_lossy(&[0xff, 0xfe, 0x00, 0x80, 0x7f, b'\n', 0xc3]).into_owned(),
        String::from_utf8_lossy(&(0..=255u8).cycle().take(4096).collect::<Vec<_>>()).into_owned(),
        "[".repeat(10_000),
        "name: x\n".to_owned() + &"field:".repeat(1000),
        "name: x\nfield:]".into(),
        "name: x\nfield:[]".into(),
        "name: x\nfield: ]]]]".into(),
        "name: x\nfield:*;offset:1;size:1".into(),
        "name: x\nfield:int *;offset:1;size:1".into(),
        "name: x\nfield:é ü;offset:1;size:1".into(),
        "name: x\nfield:int \u{1F980}[3];offset:1;size:1".into(),
    ];
    for input in &inputs {
        assert!(EventFormat::parse(input).is_err(), "{input:?}");
    }
}

#[test]
fn truncated_real_file_is_an_error_not_a_panic() {
    let full = include_str!("../testdata/formats/6.18-x86_64/page_fault_user.format");
    // Cut in the middle of the `error_code` line, before its size.
    let cut = full.find("error_code;\toffset:24;").unwrap() + "error_code;\toffset:24;".len();
    let err = parse_err(&full[..cut]);
    assert!(
        matches!(
            err.kind(),
            FormatErrorKind::MissingAttribute {
                attribute: "size",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.line(), Some(11));
    // Cut just after `name: page_fa`.
    let err = parse_err(&full[..13]);
    assert_eq!(err.kind(), &FormatErrorKind::NoFields);
}

/// Property-style: every prefix of every fixture parses without panicking.
/// When a prefix does parse, its fields are the full file's fields, except
/// that the last one may be cut short (e.g. `offset:16` cut to `offset:1`).
#[test]
fn every_prefix_of_every_fixture_is_handled() {
    for (path, text) in FIXTURES {
        let full = EventFormat::parse(text).unwrap();
        for (cut, _) in text.char_indices().chain([(text.len(), ' ')]) {
            let prefix = &text[..cut];
            if let Ok(ev) = EventFormat::parse(prefix) {
                assert!(ev.fields.len() <= full.fields.len(), "{path}@{cut}");
                let settled = ev.fields.len().saturating_sub(1);
                assert_eq!(ev.fields[..settled], full.fields[..settled], "{path}@{cut}");
                assert!(full.name.starts_with(&ev.name), "{path}@{cut}");
            }
        }
    }
}

/// Deterministic mutation fuzzing of the fixtures: random byte changes,
/// insertions and deletions, decoded lossily. Nothing may panic.
#[test]
fn mutated_fixtures_never_panic() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    const INTERESTING: &[u8] = b"\n\r\t;:[] *0123456789field:offset:size:signed:";
    for (path, text) in FIXTURES {
        for _ in 0..300 {
            let mut bytes = text.as_bytes().to_vec();
            let edits = 1 + next() % 8;
            for _ in 0..edits {
                let pos = (next() % (bytes.len() as u64 + 1)) as usize;
                let byte = if next() % 2 == 0 {
                    INTERESTING[(next() % INTERESTING.len() as u64) as usize]
                } else {
                    next() as u8
                };
                match next() % 3 {
                    0 if pos < bytes.len() => bytes[pos] = byte,
                    1 if pos < bytes.len() => {
                        bytes.remove(pos);
                    }
                    _ => bytes.insert(pos, byte),
                }
            }
            let mutated = String::from_utf8_lossy(&bytes);
            match EventFormat::parse(&mutated) {
                Ok(ev) => {
                    for f in &ev.fields {
                        assert!(f.offset.checked_add(f.size).is_some(), "{path}");
                    }
                }
                Err(e) => {
                    let msg = e.to_string();
                    assert!(!msg.contains('\n'), "{path}: {msg:?}");
                }
            }
        }
    }
}
