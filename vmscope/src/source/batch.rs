//! Reading a whole BPF map in a few syscalls (`BPF_MAP_LOOKUP_BATCH`, Linux
//! 5.6+) instead of one or two per entry, which is what iterating or
//! looking up through aya costs.

use std::os::fd::{AsFd as _, AsRawFd as _};

use aya::{Pod, maps::MapData};

/// `bpf(2)` command numbers of `BPF_MAP_LOOKUP_BATCH` and
/// `BPF_MAP_LOOKUP_AND_DELETE_BATCH`.
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
const BPF_MAP_LOOKUP_AND_DELETE_BATCH: libc::c_long = 25;

/// The kernel's ENOTSUPP (not ENOTSUP), returned for map types without
/// batch operations.
const ENOTSUPP: i32 = 524;

/// The `batch` member of `union bpf_attr`.
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// Every entry of `map` (a plain, not per-CPU, hash or array map with keys
/// `K` and values `V`), read `chunk` entries per call: small enough that
/// the buffers come from the heap, not fresh pages (vmscope's own page
/// faults would show in the system's), or `None` when the kernel refuses
/// batched lookups (before 5.6, or a map type without them): the caller
/// then iterates.
///
/// A hash map's batch ends on a bucket's boundary, so the snapshot is
/// consistent per bucket, as key-by-key iteration is per entry.
pub fn lookup_all<K: Pod, V: Pod>(
    map: &MapData,
    chunk: usize,
) -> std::io::Result<Option<Vec<(K, V)>>> {
    entries(map, chunk, BPF_MAP_LOOKUP_BATCH)
}

/// Like [`lookup_all`], deleting what it read (`BPF_MAP_LOOKUP_AND_DELETE_BATCH`):
/// a hash map drained in a few calls, each bucket under its lock.
pub fn take_all<K: Pod, V: Pod>(
    map: &MapData,
    chunk: usize,
) -> std::io::Result<Option<Vec<(K, V)>>> {
    entries(map, chunk, BPF_MAP_LOOKUP_AND_DELETE_BATCH)
}

fn entries<K: Pod, V: Pod>(
    map: &MapData,
    chunk: usize,
    cmd: libc::c_long,
) -> std::io::Result<Option<Vec<(K, V)>>> {
    let stride = std::mem::size_of::<V>();
    Ok(
        lookup_raw(map, std::mem::size_of::<K>(), stride, chunk, cmd)?.map(|(keys, values)| {
            keys.chunks_exact(std::mem::size_of::<K>())
                .zip(values.chunks_exact(stride))
                // SAFETY: each chunk holds one `K` or `V` as the kernel wrote
                // it; both are plain data, read unaligned.
                .map(|(k, v)| unsafe {
                    (
                        std::ptr::read_unaligned(k.as_ptr().cast::<K>()),
                        std::ptr::read_unaligned(v.as_ptr().cast::<V>()),
                    )
                })
                .collect()
        }),
    )
}

/// A per-CPU array's entries: each index with one value per possible CPU.
pub type PerCpuEntries<V> = Vec<(u32, Vec<V>)>;

/// Every entry of a per-CPU array `map`: its index and one `V` per
/// possible CPU. `None` as for [`lookup_all`], or when `V`'s size is not a
/// multiple of 8 (the kernel pads each CPU's value to 8 bytes).
pub fn lookup_all_percpu<V: Pod>(
    map: &MapData,
    chunk: usize,
) -> std::io::Result<Option<PerCpuEntries<V>>> {
    let size = std::mem::size_of::<V>();
    if !size.is_multiple_of(8) {
        return Ok(None);
    }
    let cpus = aya::util::nr_cpus().map_err(|(_, e)| e)?;
    let stride = size * cpus;
    Ok(
        lookup_raw(map, 4, stride, chunk, BPF_MAP_LOOKUP_BATCH)?.map(|(keys, values)| {
            keys.chunks_exact(4)
                .zip(values.chunks_exact(stride))
                .map(|(k, v)| {
                    let key = u32::from_ne_bytes([k[0], k[1], k[2], k[3]]);
                    let per_cpu = v
                        .chunks_exact(size)
                        // SAFETY: as in `lookup_all`.
                        .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<V>()) })
                        .collect();
                    (key, per_cpu)
                })
                .collect()
        }),
    )
}

/// The keys and values, as the kernel wrote them, `key_size` and
/// `value_stride` bytes each.
fn lookup_raw(
    map: &MapData,
    key_size: usize,
    value_stride: usize,
    chunk: usize,
    cmd: libc::c_long,
) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    let fd = map.fd().as_fd().as_raw_fd();
    let mut chunk = chunk.max(1);
    let (mut keys, mut values) = (Vec::new(), Vec::new());
    // The kernel's position token: a bucket index for hash maps, an index
    // for arrays (both u32); room for a u64 either way.
    let mut token = 0u64;
    let mut next = 0u64;
    let mut first = true;
    loop {
        let mut k = vec![0u8; chunk * key_size];
        let mut v = vec![0u8; chunk * value_stride];
        let mut attr = BatchAttr {
            in_batch: if first { 0 } else { (&raw const token) as u64 },
            out_batch: (&raw mut next) as u64,
            keys: k.as_mut_ptr() as u64,
            values: v.as_mut_ptr() as u64,
            count: u32::try_from(chunk).unwrap_or(u32::MAX),
            map_fd: u32::try_from(fd).unwrap_or(u32::MAX),
            ..Default::default()
        };
        // SAFETY: the attribute block and the buffers it points to outlive
        // the call; the kernel writes at most `count` keys and values.
        let ret = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                cmd,
                &raw mut attr,
                std::mem::size_of::<BatchAttr>(),
            )
        };
        let err = (ret < 0).then(std::io::Error::last_os_error);
        match err.as_ref().and_then(std::io::Error::raw_os_error) {
            // A bucket holds more entries than the buffers: larger ones.
            Some(libc::ENOSPC) if chunk < 1 << 20 => {
                chunk *= 4;
                continue;
            }
            Some(libc::EINVAL | libc::ENOTSUP | ENOTSUPP) if first => return Ok(None),
            Some(libc::ENOENT) | None => {}
            Some(_) => return Err(err.unwrap_or_else(std::io::Error::last_os_error)),
        }
        let got = (attr.count as usize).min(chunk);
        keys.extend_from_slice(&k[..got * key_size]);
        values.extend_from_slice(&v[..got * value_stride]);
        if err.is_some() {
            // ENOENT: that was the last batch.
            return Ok(Some((keys, values)));
        }
        token = next;
        first = false;
    }
}
