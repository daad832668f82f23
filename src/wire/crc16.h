// CRC-16 of the link layer and of the management packet tail (docs/system.md 1.3, 2.2).
// CRC-16/CCITT-FALSE: polynomial 0x1021, initial value 0xFFFF, no reflection, no final XOR.
// Check value: crc16("123456789") == 0x29B1.
#pragma once

#include <cstdint>
#include <span>

namespace galaxy::wire {

uint16_t crc16(std::span<const uint8_t> data, uint16_t crc = 0xFFFF);
// CRC over `width` bits starting at bit `offset` (bit numbering of base/bits.h), fed MSB-first
// bit by bit; used where the covered fields do not fall on byte boundaries.
uint16_t crc16_bits(std::span<const uint8_t> data, size_t offset, size_t width,
                    uint16_t crc = 0xFFFF);

}  // namespace galaxy::wire
