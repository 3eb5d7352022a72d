//! LZF, the compression of RDB strings (Valkey `src/lzf_c.c`, `src/lzf_d.c`, `src/lzfP.h`).
//!
//! Compressed format (one control byte, then):
//!
//! ```text
//! 000LLLLL <L+1 bytes>         literal run of 1..=32 bytes
//! LLLooooo oooooooo            back reference, L+2 = 3..=8 bytes, offset o+1 = 1..=8192
//! 111ooooo LLLLLLLL oooooooo   back reference, L+9 bytes, offset o+1
//! ```
//!
//! [`Compressor`] reproduces the servers' `lzf_compress` as built (`HLOG` 16, `VERY_FAST` 1,
//! `ULTRA_FAST` 0): the same hash, the same match rules and the same "does not fit" answers,
//! so it compresses the same strings to the same bytes. The servers do not clear their hash
//! table between calls (`INIT_HTAB` 0, a table on the stack); a stale entry can only add a
//! match the cleared table would not, so rarely a server's output differs from ours while
//! both decompress to the same bytes. Ours behaves as if the table were cleared on every call
//! (entries carry the call's generation), which keeps it deterministic without clearing
//! 512 KiB per string.

/// Why compressed bytes were refused by [`decompress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LzfError {
    /// The compressed bytes end inside a literal run or a back reference.
    #[error("compressed data ends inside an instruction")]
    InputOverrun,
    /// The data expands beyond the declared length.
    #[error("decompressed data exceeds the declared {declared} bytes")]
    OutputOverflow {
        /// The declared decompressed length.
        declared: usize,
    },
    /// A back reference points before the start of the output.
    #[error("back reference before the start of the output")]
    BadReference,
    /// The data decompresses to fewer bytes than declared.
    #[error("decompressed to {got} bytes, {declared} declared")]
    ShortOutput {
        /// The declared decompressed length.
        declared: usize,
        /// Bytes produced.
        got: usize,
    },
    /// No LZF input of this size can expand to the declared length (at most 88 bytes per
    /// input byte), so the length is corrupt; refused before any allocation.
    #[error("declared length {declared} impossible for {compressed} compressed bytes")]
    ImpossibleLength {
        /// The declared decompressed length.
        declared: u64,
        /// The compressed length.
        compressed: usize,
    },
}

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

/// The largest expansion of one input byte: a 3-byte back reference yields 264 bytes.
const MAX_RATIO: u64 = 88;

/// Decompresses `input` to exactly `declared` bytes (`lzf_decompress(in, clen, out, len) ==
/// len`, as `rdbLoadLzfStringObject` requires).
///
/// # Errors
/// [`LzfError`] for any corruption; never panics, and never allocates more than 88 bytes
/// per input byte.
pub fn decompress(input: &[u8], declared: u64) -> Result<Vec<u8>, LzfError> {
    if declared > (input.len() as u64).saturating_mul(MAX_RATIO) {
        return Err(LzfError::ImpossibleLength {
            declared,
            compressed: input.len(),
        });
    }
    // Fits in usize: bounded by 88 * input.len().
    let declared = declared as usize;
    let mut out: Vec<u8> = Vec::with_capacity(declared);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            if ip + run > input.len() {
                return Err(LzfError::InputOverrun);
            }
            if out.len() + run > declared {
                return Err(LzfError::OutputOverflow { declared });
            }
            out.extend_from_slice(&input[ip..ip + run]);
            ip += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                let Some(&more) = input.get(ip) else {
                    return Err(LzfError::InputOverrun);
                };
                len += usize::from(more);
                ip += 1;
            }
            let Some(&low) = input.get(ip) else {
                return Err(LzfError::InputOverrun);
            };
            ip += 1;
            let back = ((ctrl & 0x1f) << 8) + usize::from(low) + 1;
            let len = len + 2;
            if out.len() + len > declared {
                return Err(LzfError::OutputOverflow { declared });
            }
            if back > out.len() {
                return Err(LzfError::BadReference);
            }
            let start = out.len() - back;
            if back >= len {
                out.extend_from_within(start..start + len);
            } else {
                // Overlapping copy: each byte may repeat one written in this same copy.
                for i in 0..len {
                    let b = out[start + i];
                    out.push(b);
                }
            }
        }
    }
    if out.len() != declared {
        return Err(LzfError::ShortOutput {
            declared,
            got: out.len(),
        });
    }
    Ok(out)
}

/// `lzf_compress` as the servers build it, with a reusable hash table (512 KiB, allocated
/// on first use).
pub struct Compressor {
    /// Per hash slot: `(generation << 32) | position`; a slot of another generation is empty.
    table: Vec<u64>,
    generation: u32,
    scratch: Vec<u8>,
}

impl Default for Compressor {
    fn default() -> Compressor {
        Compressor::new()
    }
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor").finish_non_exhaustive()
    }
}

/// Copies one literal byte, closing the run at 32 bytes and starting the next.
#[inline(always)]
fn literal(o: &mut [u8], op: &mut usize, lit: &mut usize, byte: u8) {
    *lit += 1;
    o[*op] = byte;
    *op += 1;
    if *lit == MAX_LIT {
        o[*op - *lit - 1] = (*lit - 1) as u8;
        *lit = 0;
        *op += 1;
    }
}

#[inline(always)]
fn idx(h: u32) -> usize {
    // VERY_FAST: ((h >> (3*8 - HLOG)) - h*5) & (HSIZE - 1), in unsigned int arithmetic.
    ((h >> (24 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

impl Compressor {
    /// A compressor; the table is allocated on the first [`compress`](Self::compress).
    pub fn new() -> Compressor {
        Compressor {
            table: Vec::new(),
            generation: 0,
            scratch: Vec::new(),
        }
    }

    /// Compresses `input` into at most `out_len` bytes and returns them, or `None` when they
    /// do not fit (or `input` is shorter than 3 bytes, or longer than 4 GiB). The servers call
    /// this with `out_len = len - 4` for strings longer than 20 bytes
    /// (`rdbSaveLzfStringObject`).
    pub fn compress(&mut self, input: &[u8], out_len: usize) -> Option<&[u8]> {
        let in_len = input.len();
        if in_len < 3 || out_len == 0 || u32::try_from(in_len).is_err() {
            return None;
        }
        if self.table.is_empty() {
            self.table = vec![0; HSIZE];
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.table.iter_mut().for_each(|e| *e = 0);
            self.generation = 1;
        }
        let tag = u64::from(self.generation) << 32;
        let table = &mut self.table[..];
        let o = &mut self.scratch;
        o.clear();
        // Room for the tail: the last check leaves at most 3 bytes past `op`.
        o.resize(out_len + 4, 0);

        let mut ip = 0usize;
        let mut op = 1usize; // start run
        let mut lit = 0usize;
        let mut hval: u32 = (u32::from(input[0]) << 8) | u32::from(input[1]);
        while ip + 2 < in_len {
            hval = (hval << 8) | u32::from(input[ip + 2]);
            let slot = idx(hval);
            let entry = table[slot];
            // Positions fit in u32 (checked above).
            table[slot] = tag | ip as u64;
            let r = (entry & !0xffff_ffff == tag).then_some((entry & 0xffff_ffff) as usize);
            let matched = match r {
                Some(r) if r > 0 && ip - r - 1 < MAX_OFF => {
                    input[r + 2] == input[ip + 2]
                        && input[r] == input[ip]
                        && input[r + 1] == input[ip + 1]
                }
                _ => false,
            };
            if matched {
                // `matched` holds only for Some(r).
                let r = r.unwrap_or(0);
                let off = ip - r - 1;
                let maxlen = (in_len - ip - 2).min(MAX_REF);
                if op + 3 + 1 >= out_len && op - usize::from(lit == 0) + 3 + 1 >= out_len {
                    return None;
                }
                o[op - lit - 1] = (lit as u8).wrapping_sub(1); // stop run
                op -= usize::from(lit == 0); // undo run if length is zero
                                             // liblzf's `do len++; while (len < maxlen && ref[len] == ip[len]);` from 2:
                                             // the three bytes checked above always match.
                let mut len = 3usize;
                while len < maxlen && input[r + len] == input[ip + len] {
                    len += 1;
                }
                len -= 2;
                ip += 1;
                if len < 7 {
                    o[op] = ((off >> 8) + (len << 5)) as u8;
                    op += 1;
                } else {
                    o[op] = ((off >> 8) + (7 << 5)) as u8;
                    o[op + 1] = (len - 7) as u8;
                    op += 2;
                }
                o[op] = off as u8;
                op += 1;
                lit = 0;
                op += 1; // start run
                ip += len + 1;
                if ip >= in_len - 2 {
                    break;
                }
                ip -= 2;
                hval = (u32::from(input[ip]) << 8) | u32::from(input[ip + 1]);
                hval = (hval << 8) | u32::from(input[ip + 2]);
                table[idx(hval)] = tag | ip as u64;
                ip += 1;
                hval = (hval << 8) | u32::from(input[ip + 2]);
                table[idx(hval)] = tag | ip as u64;
                ip += 1;
            } else {
                if op >= out_len {
                    return None;
                }
                literal(o, &mut op, &mut lit, input[ip]);
                ip += 1;
            }
        }
        if op + 3 > out_len {
            return None;
        }
        while ip < in_len {
            literal(o, &mut op, &mut lit, input[ip]);
            ip += 1;
        }
        o[op - lit - 1] = (lit as u8).wrapping_sub(1); // end run
        op -= usize::from(lit == 0);
        Some(&o[..op])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn repeated_text_compresses_and_comes_back() {
        let text =
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".repeat(20);
        let mut c = Compressor::new();
        let out = c.compress(&text, text.len() - 4).unwrap().to_vec();
        assert!(out.len() < 40, "{}", out.len());
        assert_eq!(decompress(&out, text.len() as u64).unwrap(), text);
    }

    #[test]
    fn incompressible_input_does_not_fit() {
        let data: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let mut c = Compressor::new();
        assert!(c.compress(&data, data.len() - 4).is_none());
    }

    #[test]
    fn corrupt_inputs_are_typed_errors() {
        assert_eq!(decompress(&[5, b'a'], 6), Err(LzfError::InputOverrun));
        assert_eq!(
            decompress(&[0, b'a'], 2),
            Err(LzfError::ShortOutput {
                declared: 2,
                got: 1
            })
        );
        assert_eq!(
            decompress(&[1, b'a', b'b'], 1),
            Err(LzfError::OutputOverflow { declared: 1 })
        );
        // Back reference of offset 2 with one byte of output.
        assert_eq!(
            decompress(&[0, b'a', 0x20, 0x01], 4),
            Err(LzfError::BadReference)
        );
        assert_eq!(
            decompress(&[0, b'a', 0xe0], 100),
            Err(LzfError::InputOverrun)
        );
        assert!(matches!(
            decompress(&[0, b'a'], u64::MAX),
            Err(LzfError::ImpossibleLength { .. })
        ));
    }

    proptest! {
        #[test]
        fn compress_then_decompress_is_identity(
            data in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 3..3000),
            slack in 0usize..64,
        ) {
            let mut c = Compressor::new();
            let limit = data.len().saturating_sub(slack).max(1);
            if let Some(out) = c.compress(&data, limit) {
                prop_assert!(out.len() <= limit);
                let out = out.to_vec();
                prop_assert_eq!(decompress(&out, data.len() as u64).unwrap(), data.clone());
            }
            // A generous limit always fits.
            let out = c.compress(&data, data.len() * 2 + 16).map(|o| o.to_vec());
            prop_assert!(out.is_some());
            prop_assert_eq!(decompress(&out.unwrap(), data.len() as u64).unwrap(), data);
        }

        #[test]
        fn decompress_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200), len in 0u64..20000) {
            let _ = decompress(&data, len);
        }
    }
}
