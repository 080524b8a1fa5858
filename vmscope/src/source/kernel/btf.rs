//! Struct layouts from the kernel's BTF (`/sys/kernel/btf/vmlinux`): the
//! byte offset of a field such as `task_struct.min_flt`, so eBPF programs
//! read kernel structures at this kernel's offsets rather than hard-coded
//! ones. Only what that needs is parsed: the type section's structs,
//! unions, arrays and the modifiers between them.

use std::{
    collections::{HashMap, HashSet},
    ops::Range,
    path::Path,
    sync::{Arc, Mutex, PoisonError},
};

const MAGIC: u16 = 0xeb9f;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_FLOAT: u32 = 16;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

#[derive(Clone, Copy, Debug)]
enum Type {
    /// A struct or union: its name, size, and where its member records
    /// start in the data (read only when a field is looked up).
    Composite {
        name_off: u32,
        size: u32,
        members_at: u32,
        vlen: u16,
        kflag: bool,
    },
    Array {
        elem: u32,
        nelems: u32,
    },
    /// typedef, const, volatile, restrict, type tag: refers to another type.
    Modifier(u32),
    /// An integer, with its size in bytes.
    Int(u32),
    Pointer,
    Other,
}

/// The parsed type section. Only what lookups start from is indexed (each
/// type's kind and where its record is; named structs, tracepoints and a
/// few enumerators by name): members are read from the data when a field
/// is looked up, so the parse allocates nothing per member (the kernel's
/// BTF has hundreds of thousands). At start-up, beside aya's two parses
/// on this project's 2-CPU machines, that took this parse from 73-90 ms to
/// 23-32 ms.
pub struct Btf {
    data: Data,
    /// The string section's place in `data`.
    strings: Range<usize>,
    index: Index,
}

/// The BTF's bytes: mapped where the kernel lets its BTF file be mapped
/// (this project's 6.18 does), which takes well under a millisecond,
/// against 6-12 ms here to copy its 5 MB into a fresh buffer (a page fault
/// per 4 KiB at 2-3 µs each on this project's VMs); else read.
enum Data {
    Read(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl Data {
    fn read(path: &Path) -> std::io::Result<Data> {
        let file = std::fs::File::open(path)?;
        // SAFETY: the kernel's BTF files never change while mapped, and the
        // mapping is private and read-only.
        let mapped = unsafe {
            memmap2::MmapOptions::new()
                .populate()
                .map_copy_read_only(&file)
        };
        match mapped {
            Ok(m) => Ok(Data::Mapped(m)),
            Err(_) => Ok(Data::Read(std::fs::read(path)?)),
        }
    }
}

impl std::ops::Deref for Data {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Data::Read(v) => v,
            Data::Mapped(m) => m,
        }
    }
}

/// Where a field lives and how wide it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldSpan {
    pub offset: u32,
    /// Size in bytes (0 when the type has no size, e.g. a function).
    pub size: u32,
}

/// A parse of the kernel's BTF, kept while programs are being loaded and
/// given back by [`release`]: the parses take tens of megabytes that a
/// long-running session has no use for once its probes are attached.
struct Cached<T>(Mutex<Option<Result<Arc<T>, String>>>);

impl<T> Cached<T> {
    const fn new() -> Self {
        Cached(Mutex::new(None))
    }

    fn get(&self, parse: impl FnOnce() -> Result<T, String>) -> Result<Arc<T>, String> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        slot.get_or_insert_with(|| parse().map(Arc::new)).clone()
    }

    fn clear(&self) {
        drop(self.0.lock().unwrap_or_else(PoisonError::into_inner).take());
    }
}

static AYA_BTF: Cached<aya::Btf> = Cached::new();
static OUR_BTF: Cached<Btf> = Cached::new();

/// What aya needs of the running kernel's BTF to load tp_btf, fentry and
/// fexit programs, read once until [`release`]. aya looks up only one
/// thing in it, the type id of a `btf_trace_<tracepoint>` typedef or of a
/// function, and the kernel takes that id. So this is not a third full
/// parse of the kernel's BTF (25-45 ms at start-up here, beside aya's
/// loader's own and vmscope's) but [`Btf::lookup_blob`] built from ours: those
/// typedefs and functions at their kernel ids, every other id a
/// placeholder.
pub fn aya_vmlinux() -> Result<Arc<aya::Btf>, String> {
    AYA_BTF
        .get(|| {
            let blob = Btf::vmlinux()?.lookup_blob();
            aya::Btf::parse(&blob, Default::default())
                .map_err(|e| crate::source::kernel::errors::one_line(&e))
        })
        .map_err(|e| format!("kernel BTF: {e}"))
}

/// Gives back both parses of the kernel's BTF (a later caller parses it
/// again) and the heap pages they held.
pub fn release() {
    AYA_BTF.clear();
    OUR_BTF.clear();
    crate::source::kernel::trim_heap();
}

impl Btf {
    /// The running kernel's BTF, read once until [`release`].
    pub fn vmlinux() -> Result<Arc<Self>, String> {
        OUR_BTF.get(|| Self::from_file(Path::new("/sys/kernel/btf/vmlinux")))
    }

    pub fn from_file(path: &Path) -> Result<Self, String> {
        let data = Data::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Self::parse_data(data).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(data: Vec<u8>) -> Result<Self, String> {
        Self::parse_data(Data::Read(data))
    }

    fn parse_data(data: Data) -> Result<Self, String> {
        let r = Reader(&data);
        let (strings_at, types) = sections(&r)?;
        let strings = Strings(&data[strings_at.clone()]);
        let mut index = Index::default();
        let mut p = types.start;
        while p < types.end {
            let h = TypeHeader::read(&r, p)?;
            p += 12;
            let id = index.types.len() as u32;
            let trailer = trailer_len(h.kind, h.vlen)
                .ok_or_else(|| format!("unknown BTF kind {} (type {id})", h.kind))?;
            if p + trailer > types.end {
                return Err("truncated BTF".into());
            }
            let ty = index.decode(&r, &strings, &h, p, id)?;
            p += trailer;
            index.types.push(ty);
        }
        Ok(Btf {
            data,
            strings: strings_at,
            index,
        })
    }

    /// A BTF blob with this one's type ids, in which only the
    /// `btf_trace_*` typedefs and the functions are what they are here,
    /// with their names; every other type is a nameless placeholder pointer
    /// to `void`. Looking up a tracepoint's typedef or a function by name in
    /// it gives the id the kernel knows it by, and reading it takes a
    /// fraction of reading the whole. Written once into a buffer of its
    /// exact size: each page of it is a page fault.
    pub fn lookup_blob(&self) -> Vec<u8> {
        let count = self.index.types.len() - 1;
        let strings = self.strings();
        let names_len: usize = 1 + self
            .index
            .named
            .iter()
            .map(|n| strings.bytes(n.name_off).len() + 1)
            .sum::<usize>();
        let types_len = 12 * count;
        let mut out = Vec::with_capacity(24 + types_len + names_len);
        out.extend_from_slice(&MAGIC.to_le_bytes());
        out.extend_from_slice(&[1, 0]);
        let (t, n) = (types_len as u32, names_len as u32);
        for v in [24, 0, t, t, n] {
            out.extend_from_slice(&u32::to_le_bytes(v));
        }
        let mut named = self.index.named.iter().peekable();
        // Name offsets in the blob's own string section, which starts with
        // the empty name.
        let mut name_at = 1;
        for id in 1..=count as u32 {
            let record = match named.next_if(|n| n.id == id) {
                Some(n) => {
                    let at = name_at;
                    name_at += strings.bytes(n.name_off).len() as u32 + 1;
                    [at, n.kind << 24, 0]
                }
                None => [0, KIND_PTR << 24, 0],
            };
            for v in record {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out.push(0);
        for n in &self.index.named {
            out.extend_from_slice(strings.bytes(n.name_off));
            out.push(0);
        }
        debug_assert_eq!(out.len(), 24 + types_len + names_len);
        out
    }

    /// The offset and size of `path` (fields separated by dots, e.g.
    /// `rss_stat.count`) inside `struct name`. Fields of anonymous structs
    /// and unions are found as if they were the parent's.
    pub fn field(&self, name: &str, path: &str) -> Result<FieldSpan, String> {
        let mut id = *self
            .index
            .structs
            .get(name)
            .ok_or_else(|| format!("struct {name} is not in the kernel's BTF"))?;
        let mut offset = 0u32;
        for part in path.split('.') {
            let (bits, member_type) = self
                .find_member(id, part, 0)
                .ok_or_else(|| format!("struct {name} has no field {path}"))?;
            if bits % 8 != 0 {
                return Err(format!("{name}.{path} is a bit field"));
            }
            offset += bits / 8;
            id = member_type;
        }
        Ok(FieldSpan {
            offset,
            size: self.size_of(id),
        })
    }

    /// Whether the kernel has tracepoint `name` (a `btf_trace_<name>` type).
    pub fn has_tracepoint(&self, name: &str) -> bool {
        self.index.tracepoints.contains(name)
    }

    /// The bit number of page flag `name` (e.g. `PG_swapbacked`).
    pub fn page_flag(&self, name: &str) -> Result<u32, String> {
        self.enumerator(
            name,
            &format!("page flag {name} is not in the kernel's BTF"),
        )
    }

    /// The value of `enum cgroup_subsys_id`'s `name` (e.g. `memory_cgrp_id`).
    pub fn cgroup_subsys(&self, name: &str) -> Result<u32, String> {
        self.enumerator(name, &format!("{name} is not in the kernel's BTF"))
    }

    /// The value of `enum vm_event_item`'s `name` (e.g. `THP_FAULT_ALLOC`),
    /// which moves with the kernel's configuration.
    pub fn vm_event_item(&self, name: &str) -> Result<u32, String> {
        let why = format!("{name} is not in the kernel's BTF (a kernel without THP)");
        self.enumerator(name, &why)
    }

    /// One of the enumerators [`Index`] keeps, or `missing` as the error.
    fn enumerator(&self, name: &str, missing: &str) -> Result<u32, String> {
        self.index
            .enumerators
            .get(name)
            .copied()
            .ok_or_else(|| missing.to_string())
    }

    /// The size of `struct name` in bytes.
    pub fn struct_size(&self, name: &str) -> Result<u32, String> {
        let id = *self
            .index
            .structs
            .get(name)
            .ok_or_else(|| format!("struct {name} is not in the kernel's BTF"))?;
        Ok(self.size_of(id))
    }

    /// Whether `struct name` has a field `path`.
    pub fn has_field(&self, name: &str, path: &str) -> bool {
        self.field(name, path).is_ok()
    }

    /// The name of the struct or union that `path` in `struct name` holds
    /// (through typedefs and arrays), if it holds one.
    pub fn field_type_name(&self, name: &str, path: &str) -> Option<String> {
        let mut id = *self.index.structs.get(name)?;
        for part in path.split('.') {
            id = self.find_member(id, part, 0)?.1;
        }
        match self.index.types[self.strip(id) as usize] {
            Type::Composite { name_off, .. } => Some(self.strings().name(name_off)),
            _ => None,
        }
    }

    /// `(bit offset, type id)` of member `want` of composite `id`, looking
    /// into anonymous members.
    fn find_member(&self, id: u32, want: &str, depth: u32) -> Option<(u32, u32)> {
        if depth > 8 {
            return None;
        }
        let members = self.members(self.strip(id))?;
        let strings = self.strings();
        for m in members.clone() {
            if strings.is(m.name_off, want.as_bytes()) {
                return Some((m.bit_offset, m.type_id));
            }
        }
        members
            .filter(|m| strings.is_empty_at(m.name_off))
            .find_map(|m| {
                self.find_member(m.type_id, want, depth + 1)
                    .map(|(bits, t)| (m.bit_offset + bits, t))
            })
    }

    /// The members of composite `id`, read from its records.
    fn members(&self, id: u32) -> Option<impl Iterator<Item = Member> + Clone + '_> {
        let Type::Composite {
            members_at,
            vlen,
            kflag,
            ..
        } = *self.index.types.get(id as usize)?
        else {
            return None;
        };
        let r = Reader(&self.data);
        Some((0..usize::from(vlen)).filter_map(move |i| {
            let p = members_at as usize + 12 * i;
            let raw = r.u32(p + 8).ok()?;
            Some(Member {
                name_off: r.u32(p).ok()?,
                type_id: r.u32(p + 4).ok()?,
                // With kflag set, the top 8 bits hold a bitfield's width.
                bit_offset: if kflag { raw & 0x00ff_ffff } else { raw },
            })
        }))
    }

    fn strings(&self) -> Strings<'_> {
        Strings(&self.data[self.strings.clone()])
    }

    /// Skips typedefs and qualifiers, and arrays to their element type.
    fn strip(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.index.types.get(id as usize) {
                Some(Type::Modifier(next)) => id = *next,
                Some(Type::Array { elem, .. }) => id = *elem,
                _ => break,
            }
        }
        id
    }

    fn size_of(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.index.types.get(id as usize) {
                Some(Type::Modifier(next)) => id = *next,
                Some(Type::Array { elem, nelems }) => return self.size_of(*elem) * nelems,
                Some(Type::Composite { size, .. } | Type::Int(size)) => return *size,
                Some(Type::Pointer) => return 8,
                _ => return 0,
            }
        }
        0
    }
}

/// What [`Btf::parse`] builds as it steps through the type section.
struct Index {
    /// Index = type id; id 0 is `void`.
    types: Vec<Type>,
    structs: HashMap<Box<str>, u32>,
    /// Tracepoint names, from the `btf_trace_<name>` typedefs.
    tracepoints: HashSet<String>,
    /// The `btf_trace_*` typedefs and the functions, by id (ascending):
    /// what [`Btf::lookup_blob`] keeps.
    named: Vec<Named>,
    /// Enumerators looked up later: `enum pageflags`' (`PG_swapbacked`
    /// ...), `enum cgroup_subsys_id`'s (`memory_cgrp_id` ...) and `enum
    /// vm_event_item`'s `THP_FAULT_*`.
    enumerators: HashMap<String, u32>,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            types: vec![Type::Other],
            structs: HashMap::new(),
            tracepoints: HashSet::new(),
            named: Vec::new(),
            enumerators: HashMap::new(),
        }
    }
}

impl Index {
    /// One type from its header and the record that follows it (at `p`);
    /// notes the structs, tracepoints and page flags looked up later.
    fn decode(
        &mut self,
        r: &Reader,
        strings: &Strings,
        h: &TypeHeader,
        p: usize,
        id: u32,
    ) -> Result<Type, String> {
        Ok(match h.kind {
            KIND_INT | KIND_ENUM64 => Type::Int(h.size_or_type),
            KIND_PTR => Type::Pointer,
            KIND_ARRAY => Type::Array {
                elem: r.u32(p)?,
                nelems: r.u32(p + 8)?,
            },
            KIND_STRUCT | KIND_UNION => {
                if h.kind == KIND_STRUCT && !strings.is_empty_at(h.name_off) {
                    self.structs
                        .entry(strings.name(h.name_off).into_boxed_str())
                        .or_insert(id);
                }
                Type::Composite {
                    name_off: h.name_off,
                    size: h.size_or_type,
                    members_at: u32::try_from(p).map_err(|_| "BTF too large")?,
                    vlen: h.vlen as u16,
                    kflag: h.kflag,
                }
            }
            KIND_ENUM => {
                for i in 0..h.vlen {
                    let at = p + 8 * i;
                    let off = r.u32(at)?;
                    if strings.starts_with(off, b"PG_")
                        || strings.ends_with(off, b"_cgrp_id")
                        || strings.starts_with(off, b"THP_FAULT_")
                    {
                        let value = r.u32(at + 4)?;
                        self.enumerators.entry(strings.name(off)).or_insert(value);
                    }
                }
                Type::Int(h.size_or_type)
            }
            KIND_TYPEDEF => {
                if strings.starts_with(h.name_off, b"btf_trace_") {
                    let n = strings.name(h.name_off);
                    self.tracepoints.insert(n["btf_trace_".len()..].to_string());
                    self.named.push(Named::new(id, h));
                }
                Type::Modifier(h.size_or_type)
            }
            KIND_FUNC => {
                self.named.push(Named::new(id, h));
                Type::Other
            }
            KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                Type::Modifier(h.size_or_type)
            }
            _ => Type::Other,
        })
    }
}

/// A type kept by name in [`Btf::lookup_blob`].
struct Named {
    id: u32,
    name_off: u32,
    kind: u32,
}

impl Named {
    fn new(id: u32, h: &TypeHeader) -> Self {
        Named {
            id,
            name_off: h.name_off,
            kind: h.kind,
        }
    }
}

/// The string section and the type section's bounds, checked against the
/// data.
fn sections(r: &Reader) -> Result<(Range<usize>, Range<usize>), String> {
    let len = r.0.len();
    if r.u16(0)? != MAGIC {
        return Err("not BTF (bad magic)".into());
    }
    let hdr_len = r.u32(4)? as usize;
    let type_off = hdr_len + r.u32(8)? as usize;
    let type_len = r.u32(12)? as usize;
    let str_off = hdr_len + r.u32(16)? as usize;
    let str_len = r.u32(20)? as usize;
    let within = |off: usize, n: usize| off.checked_add(n).filter(|&e| e <= len);
    let str_end = within(str_off, str_len).ok_or("string section out of bounds")?;
    let type_end = within(type_off, type_len).ok_or("type section out of bounds")?;
    Ok((str_off..str_end, type_off..type_end))
}

/// The 12 bytes every type record starts with.
struct TypeHeader {
    name_off: u32,
    size_or_type: u32,
    vlen: usize,
    kind: u32,
    kflag: bool,
}

impl TypeHeader {
    fn read(r: &Reader, p: usize) -> Result<Self, String> {
        let name_off = r.u32(p)?;
        let info = r.u32(p + 4)?;
        let size_or_type = r.u32(p + 8)?;
        Ok(Self {
            name_off,
            size_or_type,
            vlen: (info & 0xffff) as usize,
            kind: (info >> 24) & 0x1f,
            kflag: info >> 31 == 1,
        })
    }
}

/// How many bytes follow a type's header, by kind; `None` for a kind this
/// parser does not know, whose record it cannot step over.
fn trailer_len(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION | KIND_ENUM64 | KIND_DATASEC => 12 * vlen,
        KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
        KIND_PTR | KIND_FWD | KIND_FUNC | KIND_FLOAT | KIND_TYPEDEF | KIND_VOLATILE
        | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => 0,
        _ => return None,
    })
}

/// One member of a struct or union, as its record gives it.
#[derive(Clone, Copy, Debug)]
struct Member {
    name_off: u32,
    type_id: u32,
    /// Offset in bits from the start of the enclosing struct or union.
    bit_offset: u32,
}

/// The string section: NUL-terminated names by offset.
struct Strings<'a>(&'a [u8]);

impl Strings<'_> {
    /// Whether the name at `off` is `want`, without allocating.
    fn is(&self, off: u32, want: &[u8]) -> bool {
        self.0
            .get(off as usize..)
            .is_some_and(|s| s.starts_with(want) && s.get(want.len()).is_none_or(|&b| b == 0))
    }

    /// Whether the name at `off` is empty (an anonymous member or type).
    fn is_empty_at(&self, off: u32) -> bool {
        self.0.get(off as usize).is_none_or(|&b| b == 0)
    }

    fn name(&self, off: u32) -> String {
        String::from_utf8_lossy(self.bytes(off)).into_owned()
    }

    /// The name at `off`, without its NUL.
    fn bytes(&self, off: u32) -> &[u8] {
        let s = self.0.get(off as usize..).unwrap_or_default();
        let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        &s[..end]
    }

    /// Without allocating: most names are not wanted.
    fn starts_with(&self, off: u32, prefix: &[u8]) -> bool {
        self.0
            .get(off as usize..)
            .is_some_and(|s| s.starts_with(prefix))
    }

    /// Whether the NUL-terminated string at `off` ends with `suffix`.
    fn ends_with(&self, off: u32, suffix: &[u8]) -> bool {
        self.bytes(off).ends_with(suffix)
    }
}

#[derive(Clone, Copy)]
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u16(&self, at: usize) -> Result<u16, String> {
        let b = self.0.get(at..at + 2).ok_or("truncated BTF")?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&self, at: usize) -> Result<u32, String> {
        let b = self.0.get(at..at + 4).ok_or("truncated BTF")?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny BTF blob built by hand:
    /// `struct inner { int a; long b; }`,
    /// `struct outer { int x; union { int y; struct inner in; }; long arr[3]; typedef'd inner t; }`.
    fn blob() -> Vec<u8> {
        let strings = b"\0int\0long\0inner\0a\0b\0outer\0x\0y\0in\0arr\0t\0inner_t\0";
        let s = |name: &str| -> u32 {
            let needle = format!("\0{name}\0");
            strings
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .map(|p| p as u32 + 1)
                .unwrap_or_else(|| panic!("{name}"))
        };
        let mut t: Vec<u32> = Vec::new();
        let info =
            |kind: u32, vlen: u32, kflag: bool| (kind << 24) | vlen | (u32::from(kflag) << 31);
        // 1: int (4 bytes)
        t.extend([s("int"), info(KIND_INT, 0, false), 4, 32]);
        // 2: long (8 bytes)
        t.extend([s("long"), info(KIND_INT, 0, false), 8, 64]);
        // 3: struct inner { int a @0; long b @64 bits } size 16
        t.extend([s("inner"), info(KIND_STRUCT, 2, false), 16]);
        t.extend([s("a"), 1, 0, s("b"), 2, 64]);
        // 4: anonymous union { int y; struct inner in; } size 16
        t.extend([0, info(KIND_UNION, 2, false), 16]);
        t.extend([s("y"), 1, 0, s("in"), 3, 0]);
        // 5: long[3]
        t.extend([0, info(KIND_ARRAY, 0, false), 0, 2, 1, 3]);
        // 6: typedef inner_t -> 3
        t.extend([s("inner_t"), info(KIND_TYPEDEF, 0, false), 3]);
        // 7: const -> 6
        t.extend([0, info(KIND_CONST, 0, false), 6]);
        // 8: struct outer (kflag set: offsets carry a zero bitfield size)
        t.extend([s("outer"), info(KIND_STRUCT, 4, true), 72]);
        t.extend([s("x"), 1, 0, 0, 4, 64, s("arr"), 5, 192, s("t"), 7, 384]);
        let types: Vec<u8> = t.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = Vec::new();
        out.extend(MAGIC.to_le_bytes());
        out.extend([1u8, 0]);
        for v in [
            24u32,
            0,
            types.len() as u32,
            types.len() as u32,
            strings.len() as u32,
        ] {
            out.extend(v.to_le_bytes());
        }
        out.extend(types);
        out.extend(strings);
        out
    }

    #[test]
    fn finds_fields_through_anonymous_unions_typedefs_and_paths() {
        let btf = Btf::parse(blob()).expect("parse");
        assert_eq!(
            btf.field("outer", "x"),
            Ok(FieldSpan { offset: 0, size: 4 })
        );
        assert_eq!(
            btf.field("outer", "y"),
            Ok(FieldSpan { offset: 8, size: 4 })
        );
        assert_eq!(
            btf.field("outer", "in"),
            Ok(FieldSpan {
                offset: 8,
                size: 16
            })
        );
        assert_eq!(
            btf.field("outer", "in.b"),
            Ok(FieldSpan {
                offset: 16,
                size: 8
            })
        );
        assert_eq!(
            btf.field("outer", "arr"),
            Ok(FieldSpan {
                offset: 24,
                size: 24
            })
        );
        assert_eq!(
            btf.field("outer", "t.b"),
            Ok(FieldSpan {
                offset: 56,
                size: 8
            })
        );
        assert_eq!(btf.field_type_name("outer", "t").as_deref(), Some("inner"));
        assert_eq!(btf.struct_size("outer"), Ok(72));
        assert!(
            btf.field("outer", "nope")
                .expect_err("an error")
                .contains("no field nope")
        );
        assert!(
            btf.field("missing", "x")
                .expect_err("an error")
                .contains("not in the kernel's BTF")
        );
    }

    #[test]
    fn truncated_or_foreign_data_is_an_error_not_a_panic() {
        let b = blob();
        for cut in [0, 3, 10, 30, b.len() - 5] {
            assert!(Btf::parse(b[..cut].to_vec()).is_err(), "cut at {cut}");
        }
        assert!(Btf::parse(b"hello world, not btf at all".to_vec()).is_err());
    }

    #[test]
    fn the_running_kernels_task_struct_has_the_fault_counters() {
        let Ok(btf) = Btf::vmlinux() else {
            eprintln!("skipped: /sys/kernel/btf/vmlinux is not readable here");
            return;
        };
        let min = btf.field("task_struct", "min_flt").expect("min_flt");
        let maj = btf.field("task_struct", "maj_flt").expect("maj_flt");
        assert_eq!((min.size, maj.size), (8, 8));
        assert_eq!(maj.offset, min.offset + 8, "adjacent, read as one pair");
        assert_eq!(btf.field("task_struct", "flags").expect("flags").size, 4);
    }

    /// The placeholder BTF aya loads programs with gives every tracepoint's
    /// typedef and every function the id aya finds in the kernel's own
    /// (the id the kernel then attaches to), first of a name included.
    #[test]
    fn the_lookup_blob_gives_the_kernels_ids() {
        let Ok(ours) = Btf::vmlinux() else {
            eprintln!("skipped: /sys/kernel/btf/vmlinux is not readable here");
            return;
        };
        let full = aya::Btf::from_sys_fs().expect("aya parses the kernel's BTF");
        let stand_in = aya::Btf::parse(&ours.lookup_blob(), Default::default()).expect("parse");
        let strings = ours.strings();
        let mut tracepoints = 0;
        let mut functions = 0;
        for (i, n) in ours.index.named.iter().enumerate() {
            let (kind, sample) = match n.kind {
                KIND_TYPEDEF => (aya_obj::btf::BtfKind::Typedef, true),
                // One function in 50: each lookup walks every type.
                _ => (aya_obj::btf::BtfKind::Func, i % 50 == 0),
            };
            if !sample {
                continue;
            }
            let name = strings.name(n.name_off);
            let want = full
                .id_by_type_name_kind(&name, kind)
                .expect("in the kernel's");
            let got = stand_in.id_by_type_name_kind(&name, kind);
            assert_eq!(got.ok(), Some(want), "{name}");
            if n.kind == KIND_TYPEDEF {
                tracepoints += 1;
            } else {
                functions += 1;
            }
        }
        assert!(
            tracepoints > 100 && functions > 100,
            "{tracepoints} {functions}"
        );
        for (name, kind) in [
            ("btf_trace_sched_switch", aya_obj::btf::BtfKind::Typedef),
            ("vfs_read", aya_obj::btf::BtfKind::Func),
        ] {
            assert_eq!(
                stand_in.id_by_type_name_kind(name, kind).ok(),
                full.id_by_type_name_kind(name, kind).ok(),
                "{name}"
            );
        }
        // Nothing else is findable by name in it.
        assert!(
            stand_in
                .id_by_type_name_kind("task_struct", aya_obj::btf::BtfKind::Struct)
                .is_err()
        );
    }
}
