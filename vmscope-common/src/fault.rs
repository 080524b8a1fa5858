//! Page-fault error-code classification (x86 `X86_PF_*` bits).

/// `{read, write, instruction fetch} x {not-present, protection}`.
pub const FAULT_CLASSES: usize = 6;

const PF_PROT: u64 = 1 << 0;
const PF_WRITE: u64 = 1 << 1;
const PF_INSTR: u64 = 1 << 4;

/// Maps an x86 page-fault error code to a class index in `0..FAULT_CLASSES`.
///
/// The index is `access * 2 + protection`, where access is 0 for a read,
/// 1 for a write and 2 for an instruction fetch.
#[inline(always)]
pub fn fault_class(error_code: u64) -> usize {
    let access = if error_code & PF_INSTR != 0 {
        2
    } else if error_code & PF_WRITE != 0 {
        1
    } else {
        0
    };
    access * 2 + (error_code & PF_PROT != 0) as usize
}

/// Stable snake_case name of a class, used in JSON and metrics.
pub fn fault_class_name(class: usize) -> &'static str {
    match class {
        0 => "read_not_present",
        1 => "read_protection",
        2 => "write_not_present",
        3 => "write_protection",
        4 => "exec_not_present",
        5 => "exec_protection",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_x86_error_codes() {
        // user read of an absent page
        assert_eq!(fault_name(0x4), "read_not_present");
        // user write to an absent page (first touch of anonymous memory)
        assert_eq!(fault_name(0x6), "write_not_present");
        // user write to a present read-only page (COW, mprotect)
        assert_eq!(fault_name(0x7), "write_protection");
        // instruction fetch from an NX page
        assert_eq!(fault_name(0x15), "exec_protection");
        assert_eq!(fault_name(0x14), "exec_not_present");
        assert_eq!(fault_name(0x1), "read_protection");
    }

    fn fault_name(code: u64) -> &'static str {
        fault_class_name(fault_class(code))
    }

    #[test]
    fn every_class_has_a_name() {
        for c in 0..FAULT_CLASSES {
            assert_ne!(fault_class_name(c), "unknown");
        }
    }
}
