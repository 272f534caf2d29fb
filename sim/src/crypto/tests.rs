//! The IEEE 1619-2007 XTS-AES vectors, RFC 3394 key wrap vectors, the job-size rule, and a
//! proptest against xts-mode used directly.

use proptest::prelude::*;

use super::*;

fn hex(text: &str) -> Vec<u8> {
    (0..text.len() / 2).filter_map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()).collect()
}

fn tweak(dusn: u128) -> [u8; 16] {
    dusn.to_le_bytes()
}

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// IEEE 1619-2007 Annex B: (vector, key1, key2, data unit sequence number, PTX, CTX).
const AES128_VECTORS: &[(u32, &str, &str, u128, &str, &str)] = &[
    (
        1,
        "00000000000000000000000000000000",
        "00000000000000000000000000000000",
        0,
        "0000000000000000000000000000000000000000000000000000000000000000",
        "917cf69ebd68b2ec9b9fe9a3eadda692cd43d2f59598ed858c02c2652fbf922e",
    ),
    (
        2,
        "11111111111111111111111111111111",
        "22222222222222222222222222222222",
        0x33_3333_3333,
        "4444444444444444444444444444444444444444444444444444444444444444",
        "c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0",
    ),
    (
        3,
        "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0",
        "22222222222222222222222222222222",
        0x33_3333_3333,
        "4444444444444444444444444444444444444444444444444444444444444444",
        "af85336b597afc1a900b2eb21ec949d292df4c047e0b21532186a5971a227a89",
    ),
    (
        15,
        "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0",
        "bfbebdbcbbbab9b8b7b6b5b4b3b2b1b0",
        0x12_3456_789a,
        "000102030405060708090a0b0c0d0e0f10",
        "6c1625db4671522d3d7599601de7ca09ed",
    ),
    (
        18,
        "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0",
        "bfbebdbcbbbab9b8b7b6b5b4b3b2b1b0",
        0x12_3456_789a,
        "000102030405060708090a0b0c0d0e0f10111213",
        "9d84c813f719aa2c7be3f66171c7c5c2edbf9dac",
    ),
];

/// IEEE 1619-2007 vector 10: XTS-AES-256, one 512-byte data unit, sequence number 0xff.
const V10_KEY1: &str = "2718281828459045235360287471352662497757247093699959574966967627";
const V10_KEY2: &str = "3141592653589793238462643383279502884197169399375105820974944592";
const V10_CTX: [&str; 11] = [
    "1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b5d31e276f8fe4a8d66b317f9ac683f44",
    "680a86ac35adfc3345befecb4bb188fd5776926c49a3095eb108fd1098baec70aaa66999a72a82f27d848b21d4a741b0",
    "c5cd4d5fff9dac89aeba122961d03a757123e9870f8acf1000020887891429ca2a3e7a7d7df7b10355165c8b9a6d0a7d",
    "e8b062c4500dc4cd120c0f7418dae3d0b5781c34803fa75421c790dfe1de1834f280d7667b327f6c8cd7557e12ac3a0f",
    "93ec05c52e0493ef31a12d3d9260f79a289d6a379bc70c50841473d1a8cc81ec583e9645e07b8d9670655ba5bbcfecc6",
    "dc3966380ad8fecb17b6ba02469a020a84e18e8f84252070c13e9f1f289be54fbc481457778f616015e1327a02b140f1",
    "505eb309326d68378f8374595c849d84f4c333ec4423885143cb47bd71c5edae9be69a2ffeceb1bec9de244fbe15992b",
    "11b77c040f12bd8f6a975a44a0f90c29a9abc3d4d893927284c58754cce294529f8614dcd2aba991925fedc4ae74ffac",
    "6e333b93eb4aff0479da9a410e4450e0dd7ae4c6e2910900575da401fc07059f645e8b7e9bfdef33943054ff84011493",
    "c27b3429eaedb4ed5376441a77ed43851ad77f16f541dfd269d50d6a5f14fb0aab1cbb4c1550be97f7ab4066193c4caa",
    "773dad38014bd2092fa755c824bb5e54c4f36ffda9fcea70b9c6e693e148c151",
];

#[test]
fn ieee_1619_aes128_vectors() -> TestResult {
    for (v, k1, k2, dusn, ptx, ctx) in AES128_VECTORS {
        let keys = XtsKeys::new(&hex(k1), &hex(k2))?;
        let mut data = hex(ptx);
        keys.unit(&mut data, tweak(*dusn), Direction::Encrypt);
        assert_eq!(data, hex(ctx), "vector {v}");
        keys.unit(&mut data, tweak(*dusn), Direction::Decrypt);
        assert_eq!(data, hex(ptx), "vector {v} decrypts back");
    }
    Ok(())
}

#[test]
fn ieee_1619_aes256_vector_10_as_one_512_byte_data_unit() -> TestResult {
    let keys = XtsKeys::new(&hex(V10_KEY1), &hex(V10_KEY2))?;
    let plain: Vec<u8> = (0..512).map(|i| i as u8).collect();
    let expect = hex(&V10_CTX.concat());
    assert_eq!(expect.len(), 512);
    let mut data = plain.clone();
    transform(&keys, 512, &tweak(0xff), Direction::Encrypt, &mut data)?;
    assert_eq!(data, expect);
    transform(&keys, 512, &tweak(0xff), Direction::Decrypt, &mut data)?;
    assert_eq!(data, plain);
    Ok(())
}

#[test]
fn the_tweak_counts_up_per_data_unit_and_wraps() -> TestResult {
    let keys = XtsKeys::new(&hex(V10_KEY1), &hex(V10_KEY2))?;
    let plain: Vec<u8> = (0..1024).map(|i| i as u8).collect();
    let mut two = plain.clone();
    transform(&keys, 512, &tweak(0xfe), Direction::Encrypt, &mut two)?;
    assert_eq!(two.get(512..), Some(hex(&V10_CTX.concat()).as_slice()), "unit 1 uses tweak 0xfe + 1");
    assert_eq!(unit_tweak(&[0xff; 16], 1), [0; 16]);
    assert_eq!(unit_tweak(&tweak(0x1ff), 1), tweak(0x200));
    Ok(())
}

#[test]
fn job_size_rule_as_the_man_page_gives_it() {
    for (job, dus, ok) in [
        (512, 512, true),
        (128, 512, true),
        (47, 512, false),
        (520, 520, true),
        (496, 520, true),
        (512, 520, false),
        (0, 512, true),
        (1040, 520, true),
        (1024 + 512 - 16, 512, true),
        (4096 + 16, 4096, true),
        (4096 + 4096 - 16, 4096, true),
        (4160 + 8, 4160, false),
        (16, 8, false),
    ] {
        assert_eq!(job_size_valid(job, dus), ok, "job {job}, dus {dus}");
    }
}

#[test]
fn invalid_jobs_and_keys_are_errors_that_leave_data_alone() -> TestResult {
    let keys = XtsKeys::new(&[1; 32], &[2; 32])?;
    let mut data = vec![7u8; 47];
    assert_eq!(
        transform(&keys, 512, &[0; 16], Direction::Encrypt, &mut data),
        Err(CryptoError::JobSize { job: 47, dus: 512 })
    );
    assert!(data.iter().all(|b| *b == 7));
    assert!(matches!(XtsKeys::new(&[0; 24], &[0; 24]), Err(CryptoError::KeyLength(24))));
    assert!(matches!(XtsKeys::new(&[0; 16], &[0; 32]), Err(CryptoError::KeyLength(32))));
    Ok(())
}

#[test]
fn rfc_3394_key_wrap_vectors() -> TestResult {
    // RFC 3394 4.1: 128 bits of key data with a 128-bit KEK.
    let kek = hex("000102030405060708090a0b0c0d0e0f");
    let key = hex("00112233445566778899aabbccddeeff");
    let wrapped = wrap_key(&kek, &key)?;
    assert_eq!(wrapped, hex("1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5"));
    assert_eq!(unwrap_key(&kek, &wrapped)?, key);
    // RFC 3394 4.6: 256 bits of key data with a 256-bit KEK.
    let kek = hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f");
    let key = hex("00112233445566778899aabbccddeeff000102030405060708090a0b0c0d0e0f");
    let wrapped = wrap_key(&kek, &key)?;
    assert_eq!(wrapped, hex("28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326cbc7f0e71a99f43bfb988b9b7a02dd21"));
    assert_eq!(unwrap_key(&kek, &wrapped)?, key);
    Ok(())
}

#[test]
fn a_wrong_kek_or_damaged_wrap_does_not_unwrap() -> TestResult {
    let kek = [0x5a; 32];
    let mut wrapped = wrap_key(&kek, &[3; 40])?;
    assert_eq!(wrapped.len(), 48);
    assert_eq!(unwrap_key(&[0x5b; 32], &wrapped), Err(CryptoError::Unwrap));
    wrapped[20] ^= 1;
    assert_eq!(unwrap_key(&kek, &wrapped), Err(CryptoError::Unwrap));
    assert!(matches!(unwrap_key(&kek, &wrapped[..20]), Err(CryptoError::WrapLength(20))));
    assert!(matches!(wrap_key(&[0; 24], &[0; 16]), Err(CryptoError::WrapLength(24))));
    assert!(matches!(wrap_key(&kek, &[0; 12]), Err(CryptoError::WrapLength(12))));
    Ok(())
}

const DATA_UNITS: [usize; 5] = [512, 520, 4048, 4096, 4160];

/// A valid job for `dus`: whole units and, maybe, a short tail of whole blocks.
fn job_len(dus: usize, units: usize, tail_blocks: usize) -> usize {
    let tail = (tail_blocks * AES_BLOCK).min(dus - AES_BLOCK);
    units * dus + tail
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Through `transform` equals xts-mode driven unit by unit, and decrypts back.
    #[test]
    fn transform_equals_xts_mode_unit_by_unit(
        dus in proptest::sample::select(DATA_UNITS.to_vec()),
        units in 0usize..3,
        tail_blocks in 0usize..8,
        initial in any::<u128>(),
        wide in any::<bool>(),
        key in proptest::collection::vec(any::<u8>(), 64),
        seed in any::<u8>(),
    ) {
        let len = job_len(dus, units, tail_blocks);
        prop_assume!(len > 0 && job_size_valid(len, dus));
        let plain: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
        let half = if wide { 32 } else { 16 };
        let (k1, k2) = (&key[..half], &key[half..2 * half]);
        let keys = XtsKeys::new(k1, k2).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut got = plain.clone();
        transform(&keys, dus, &initial.to_le_bytes(), Direction::Encrypt, &mut got)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;

        let mut want = plain.clone();
        for (i, unit) in want.chunks_mut(dus).enumerate() {
            let t = get_tweak_default(initial.wrapping_add(i as u128));
            if wide {
                let x = Xts128::new(
                    Aes256::new_from_slice(k1).map_err(|e| TestCaseError::fail(e.to_string()))?,
                    Aes256::new_from_slice(k2).map_err(|e| TestCaseError::fail(e.to_string()))?,
                );
                x.encrypt_sector(unit, t);
            } else {
                let x = Xts128::new(
                    Aes128::new_from_slice(k1).map_err(|e| TestCaseError::fail(e.to_string()))?,
                    Aes128::new_from_slice(k2).map_err(|e| TestCaseError::fail(e.to_string()))?,
                );
                x.encrypt_sector(unit, t);
            }
        }
        prop_assert_eq!(&got, &want);
        transform(&keys, dus, &initial.to_le_bytes(), Direction::Decrypt, &mut got)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(got, plain);
    }
}

#[test]
fn the_published_test_login_wraps_to_the_readme_value() -> TestResult {
    use mlx5_dv::profile::{test_credential, test_import_kek};
    let wrapped = wrap_key(&test_import_kek(), &test_credential())?;
    let text: String = wrapped.iter().map(|b| format!("{b:02x}")).collect();
    let want = "05924de31cca4eaea6b7d8382fb7810fedaf23890ce0ab48f320f03899e7e421\
                29251e6d1c71f74a1e463a8bdec03882";
    assert_eq!(text, want);
    Ok(())
}

#[test]
fn the_smallest_legal_sizes_at_their_edges() -> Result<(), CryptoError> {
    // A data unit of one AES block is legal (the rule refuses only shorter ones).
    assert!(job_size_valid(32, 16) && job_size_valid(0, 16));
    assert!(!job_size_valid(16, 15));
    // RFC 3394's smallest plaintext is two words: 16 bytes wrap into 24 and back.
    let kek = [0x5a; 16];
    let wrapped = wrap_key(&kek, &[7; 16])?;
    assert_eq!(wrapped.len(), 24);
    assert_eq!(unwrap_key(&kek, &wrapped)?, vec![7; 16]);
    assert_eq!(wrap_key(&kek, &[7; 8]), Err(CryptoError::WrapLength(8)));
    // A wrapped key shorter than 24 bytes, or not whole words, is a length error, not a
    // failed integrity check.
    assert_eq!(unwrap_key(&kek, &[0; 16]), Err(CryptoError::WrapLength(16)));
    assert_eq!(unwrap_key(&kek, &[0; 25]), Err(CryptoError::WrapLength(25)));
    assert_eq!(unwrap_key(&kek, &[0; 24]), Err(CryptoError::Unwrap));
    assert!(CryptoError::Unwrap.to_string().contains("integrity check"), "{}", CryptoError::Unwrap);
    Ok(())
}

#[test]
fn a_key_pair_prints_its_size_and_never_its_keys() -> Result<(), CryptoError> {
    let short = format!("{:?}", XtsKeys::new(&[0xab; 16], &[0xcd; 16])?);
    let long = format!("{:?}", XtsKeys::new(&[0xab; 32], &[0xcd; 32])?);
    assert_eq!(short, "XtsKeys(AES-128, keys hidden)");
    assert_eq!(long, "XtsKeys(AES-256, keys hidden)");
    Ok(())
}
