/* done_ack_frame: prints, in hex, the bytes of the scheduler's DONE_ACK as
 * they go on the wire to a worker: ZeroMQ's frame header (flags 0: the last
 * frame; a short frame's one-byte size) and Loom's message header, whose
 * fields are all zero but its magic, version and type. test_done_ack.sh gives
 * them to netimpair --drop-once, which drops that one segment. Built from
 * core's encoder, so the pattern follows the wire format as it changes. */
#include <stdio.h>

#include "core/msg.h"

int main(void)
{
    msg_header h = {.type = MSG_DONE_ACK};
    uint8_t hdr[MSG_HEADER_SIZE];
    msg_encode_header(&h, hdr);
    printf("00%02x", MSG_HEADER_SIZE);
    for (size_t i = 0; i < sizeof hdr; i++) printf("%02x", hdr[i]);
    printf("\n");
    return 0;
}
