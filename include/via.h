/* The VI Architecture user API (VIPL) on Galaxy: the names, types, descriptor layout and return
 * codes of the VIA 1.0 specification (Compaq, Intel, Microsoft, 1997), as MyVIA implemented them
 * (docs/system.md 4), over libglex (docs/via.md). A VI is one VP of the NIC; sends and receives
 * travel as mini-packets, large ones by RDMA, RDMA write and read as the NIC's RDMA.
 *
 * Link: cc prog.c -Iinclude -Lbuild/release/lib -lvipl -lglex */
#ifndef VIA_H
#define VIA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t VIP_UINT64;
typedef uint32_t VIP_UINT32;
typedef uint16_t VIP_UINT16;
typedef uint8_t VIP_UINT8;
typedef unsigned char VIP_UCHAR;
typedef char VIP_CHAR;
typedef unsigned short VIP_USHORT;
typedef short VIP_SHORT;
typedef unsigned long VIP_ULONG;
typedef long VIP_LONG;
typedef int VIP_BOOLEAN;
typedef void* VIP_PVOID;

#define VIP_TRUE 1
#define VIP_FALSE 0
#define VIP_INFINITE ((VIP_ULONG)0xFFFFFFFFu) /* a timeout in milliseconds that never ends */

typedef VIP_PVOID VIP_QOS;
typedef struct via_nic* VIP_NIC_HANDLE;
typedef struct via_vi* VIP_VI_HANDLE;
typedef struct via_cq* VIP_CQ_HANDLE;
typedef struct via_ptag* VIP_PROTECTION_HANDLE;
typedef struct via_conn* VIP_CONN_HANDLE;
typedef VIP_UINT32 VIP_MEM_HANDLE;

/* ---- Descriptors (VIA 1.0 section 6: control segment, address segment, data segments) ------- */
struct _VIP_DESCRIPTOR;
typedef union {
  VIP_UINT64 AddressBits;
  VIP_PVOID Address;
  struct _VIP_DESCRIPTOR* Descriptor;
} VIP_PVOID64;

typedef struct {
  VIP_PVOID64 Next; /* not followed: each post names one descriptor */
  VIP_MEM_HANDLE NextHandle;
  VIP_UINT16 SegCount; /* address segment (RDMA) plus data segments */
  VIP_UINT16 Control;  /* VIP_CONTROL_* */
  VIP_UINT32 Reserved;
  VIP_UINT32 ImmediateData; /* sent with VIP_CONTROL_IMMEDIATE; received into a receive's */
  VIP_UINT32 Length;        /* on completion: the bytes moved */
  VIP_UINT32 Status;        /* VIP_STATUS_*: written last, DONE set when complete */
} VIP_CONTROL_SEGMENT;

#define VIP_CONTROL_OP_SENDRECV 0x0
#define VIP_CONTROL_OP_RDMAWRITE 0x1
#define VIP_CONTROL_OP_RDMAREAD 0x2
#define VIP_CONTROL_OP_RESERVED 0x3
#define VIP_CONTROL_OP_MASK 0x3
#define VIP_CONTROL_IMMEDIATE 0x4
#define VIP_CONTROL_QFENCE 0x8
#define VIP_CONTROL_RESERVED 0xFFF0

#define VIP_STATUS_DONE 0x1
#define VIP_STATUS_FORMAT_ERROR 0x2
#define VIP_STATUS_PROTECTION_ERROR 0x4
#define VIP_STATUS_LENGTH_ERROR 0x8
#define VIP_STATUS_PARTIAL_ERROR 0x10
#define VIP_STATUS_DESC_FLUSHED_ERROR 0x20
#define VIP_STATUS_TRANSPORT_ERROR 0x40
#define VIP_STATUS_RDMA_PROT_ERROR 0x80
#define VIP_STATUS_REMOTE_DESC_ERROR 0x100
#define VIP_STATUS_ERROR_MASK 0x1FE
#define VIP_STATUS_OP_SEND 0x00000
#define VIP_STATUS_OP_RECEIVE 0x10000
#define VIP_STATUS_OP_RDMA_WRITE 0x20000
#define VIP_STATUS_OP_REMOTE_RDMA_WRITE 0x30000
#define VIP_STATUS_OP_RDMA_READ 0x40000
#define VIP_STATUS_OP_MASK 0x70000
#define VIP_STATUS_IMMEDIATE 0x80000
#define VIP_STATUS_RESERVED 0xFFF0FE00

typedef struct {
  VIP_PVOID64 Data;      /* the remote virtual address */
  VIP_MEM_HANDLE Handle; /* the remote registration, as VipRegisterMem gave it to the peer */
  VIP_UINT32 Reserved;
} VIP_ADDRESS_SEGMENT;

typedef struct {
  VIP_PVOID64 Data;
  VIP_MEM_HANDLE Handle;
  VIP_UINT32 Length;
} VIP_DATA_SEGMENT;

typedef union {
  VIP_ADDRESS_SEGMENT Remote;
  VIP_DATA_SEGMENT Local;
} VIP_DESCRIPTOR_SEGMENT;

/* A descriptor is a control segment followed by SegCount segments in contiguous memory (the
 * address segment first for RDMA); DS[2] is the common case, allocate more for longer lists. */
typedef struct _VIP_DESCRIPTOR {
  VIP_CONTROL_SEGMENT CS;
  VIP_DESCRIPTOR_SEGMENT DS[2];
} VIP_DESCRIPTOR;

#define VIP_DESCRIPTOR_ALIGNMENT 64

typedef enum {
  VIP_SUCCESS,
  VIP_NOT_DONE,
  VIP_INVALID_PARAMETER,
  VIP_ERROR_RESOURCE,
  VIP_TIMEOUT,
  VIP_REJECT,
  VIP_INVALID_RELIABILITY_LEVEL,
  VIP_INVALID_MTU,
  VIP_INVALID_QOS,
  VIP_INVALID_PTAG,
  VIP_INVALID_RDMAREAD,
  VIP_DESCRIPTOR_ERROR,
  VIP_INVALID_STATE,
  VIP_ERROR_NAMESERVICE,
  VIP_NO_MATCH,
  VIP_NOT_REACHABLE,
  VIP_ERROR_NOT_SUPPORTED
} VIP_RETURN;

typedef VIP_USHORT VIP_RELIABILITY_LEVEL;
#define VIP_SERVICE_UNRELIABLE 1
#define VIP_SERVICE_RELIABLE_DELIVERY 2
#define VIP_SERVICE_RELIABLE_RECEPTION 4

/* A network address: HostAddress holds HostAddressLen bytes of host address (here the 8-byte
 * glex endpoint address of the NIC's connection manager) followed by DiscriminatorLen bytes of
 * discriminator. Allocate it with room for both (VIP_NET_ADDRESS_BYTES). */
typedef struct {
  VIP_UINT16 HostAddressLen;
  VIP_UINT16 DiscriminatorLen;
  VIP_UINT8 HostAddress[1];
} VIP_NET_ADDRESS;
#define VIP_HOST_ADDRESS_LEN 8
#define VIP_MAX_DISCRIMINATOR_LEN 16
#define VIP_NET_ADDRESS_BYTES \
  (sizeof(VIP_NET_ADDRESS) + VIP_HOST_ADDRESS_LEN + VIP_MAX_DISCRIMINATOR_LEN)

typedef struct {
  VIP_CHAR Name[64];
  VIP_ULONG HardwareVersion;
  VIP_ULONG ProviderVersion;
  VIP_UINT16 NicAddressLen;
  const VIP_UINT8* LocalNicAddress;
  VIP_BOOLEAN ThreadSafe;
  VIP_UINT16 MaxDiscriminatorLen;
  VIP_ULONG MaxRegisterBytes;
  VIP_ULONG MaxRegisterRegions;
  VIP_ULONG MaxRegisterBlockBytes;
  VIP_ULONG MaxVI;
  VIP_ULONG MaxDescriptorsPerQueue;
  VIP_ULONG MaxSegmentsPerDesc;
  VIP_ULONG MaxCQ;
  VIP_ULONG MaxCQEntries;
  VIP_ULONG MaxTransferSize;
  VIP_ULONG NativeMTU;
  VIP_ULONG MaxPtags;
  VIP_RELIABILITY_LEVEL ReliabilityLevelSupport;
  VIP_RELIABILITY_LEVEL RDMAReadSupport;
} VIP_NIC_ATTRIBUTES;

typedef struct {
  VIP_PROTECTION_HANDLE Ptag;
  VIP_BOOLEAN EnableRdmaWrite;
  VIP_BOOLEAN EnableRdmaRead;
} VIP_MEM_ATTRIBUTES;

typedef enum {
  VIP_RESOURCE_NIC,
  VIP_RESOURCE_VI,
  VIP_RESOURCE_CQ,
  VIP_RESOURCE_DESCRIPTOR
} VIP_RESOURCE_CODE;

typedef enum {
  VIP_ERROR_POST_DESC,
  VIP_ERROR_CONN_LOST,
  VIP_ERROR_RECVQ_EMPTY,
  VIP_ERROR_VI_OVERRUN,
  VIP_ERROR_RDMAW_PROT,
  VIP_ERROR_RDMAW_DATA,
  VIP_ERROR_RDMAW_ABORT,
  VIP_ERROR_RDMAR_PROT,
  VIP_ERROR_COMP_PROT,
  VIP_ERROR_RDMA_TRANSPORT,
  VIP_ERROR_CATASTROPHIC
} VIP_ERROR_CODE;

typedef struct {
  VIP_NIC_HANDLE NicHandle;
  VIP_VI_HANDLE ViHandle;
  VIP_CQ_HANDLE CQHandle;
  VIP_DESCRIPTOR* DescriptorPtr;
  VIP_ULONG OpCode;
  VIP_RESOURCE_CODE ResourceCode;
  VIP_ERROR_CODE ErrorCode;
} VIP_ERROR_DESCRIPTOR;

typedef enum {
  VIP_STATE_IDLE,
  VIP_STATE_CONNECTED,
  VIP_STATE_CONNECT_PENDING,
  VIP_STATE_ERROR
} VIP_VI_STATE;

typedef struct {
  VIP_RELIABILITY_LEVEL ReliabilityLevel;
  VIP_ULONG MaxTransferSize;
  VIP_QOS QoS;
  VIP_PROTECTION_HANDLE Ptag;
  VIP_BOOLEAN EnableRdmaWrite;
  VIP_BOOLEAN EnableRdmaRead;
} VIP_VI_ATTRIBUTES;

typedef void (*VIP_ERROR_HANDLER)(VIP_PVOID Context, VIP_ERROR_DESCRIPTOR* Error);

/* ---- NIC ------------------------------------------------------------------------------------- */
/* DeviceName: NULL or "" for the libglex defaults ($GLEX_FABRIC, $GLEX_HOST, $GLEX_NIC), else a
 * fabric name or spec as glex_device_attr.fabric takes it, optionally followed by "#host=<h>"
 * and "#nic=<chip id>" (e.g. "sim:th2#nic=4616"). */
VIP_RETURN VipOpenNic(const VIP_CHAR* DeviceName, VIP_NIC_HANDLE* NicHandle);
VIP_RETURN VipCloseNic(VIP_NIC_HANDLE NicHandle);
VIP_RETURN VipQueryNic(VIP_NIC_HANDLE NicHandle, VIP_NIC_ATTRIBUTES* Attributes);
VIP_RETURN VipRegisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress, VIP_ULONG Length,
                          VIP_MEM_ATTRIBUTES* MemAttributes, VIP_MEM_HANDLE* MemHandle);
VIP_RETURN VipDeregisterMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress,
                            VIP_MEM_HANDLE MemHandle);
VIP_RETURN VipQueryMem(VIP_NIC_HANDLE NicHandle, VIP_PVOID VirtualAddress, VIP_MEM_HANDLE MemHandle,
                       VIP_MEM_ATTRIBUTES* MemAttributes);
VIP_RETURN VipErrorCallback(VIP_NIC_HANDLE NicHandle, VIP_PVOID Context,
                            VIP_ERROR_HANDLER ErrorHandler);
VIP_RETURN VipCreatePtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE* ProtectionTag);
VIP_RETURN VipDestroyPtag(VIP_NIC_HANDLE NicHandle, VIP_PROTECTION_HANDLE ProtectionTag);

/* ---- VIs ------------------------------------------------------------------------------------- */
VIP_RETURN VipCreateVi(VIP_NIC_HANDLE NicHandle, VIP_VI_ATTRIBUTES* ViAttributes,
                       VIP_CQ_HANDLE SendCQHandle, VIP_CQ_HANDLE RecvCQHandle,
                       VIP_VI_HANDLE* ViHandle);
VIP_RETURN VipDestroyVi(VIP_VI_HANDLE ViHandle);
VIP_RETURN VipQueryVi(VIP_VI_HANDLE ViHandle, VIP_VI_STATE* State, VIP_VI_ATTRIBUTES* Attributes,
                      VIP_BOOLEAN* SendQueueEmpty, VIP_BOOLEAN* RecvQueueEmpty);
VIP_RETURN VipSetViAttributes(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES* Attributes);

VIP_RETURN VipPostSend(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR* DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle);
VIP_RETURN VipSendDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR** DescriptorPtr);
VIP_RETURN VipSendWait(VIP_VI_HANDLE ViHandle, VIP_ULONG TimeOut, VIP_DESCRIPTOR** DescriptorPtr);
VIP_RETURN VipPostRecv(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR* DescriptorPtr,
                       VIP_MEM_HANDLE MemoryHandle);
VIP_RETURN VipRecvDone(VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR** DescriptorPtr);
VIP_RETURN VipRecvWait(VIP_VI_HANDLE ViHandle, VIP_ULONG TimeOut, VIP_DESCRIPTOR** DescriptorPtr);

/* ---- Connections (client-server) --------------------------------------------------------------
 */
VIP_RETURN VipConnectWait(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS* LocalAddr, VIP_ULONG Timeout,
                          VIP_NET_ADDRESS* RemoteAddr, VIP_VI_ATTRIBUTES* RemoteViAttributes,
                          VIP_CONN_HANDLE* ConnHandle);
VIP_RETURN VipConnectAccept(VIP_CONN_HANDLE ConnHandle, VIP_VI_HANDLE ViHandle);
VIP_RETURN VipConnectReject(VIP_CONN_HANDLE ConnHandle);
VIP_RETURN VipConnectRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS* LocalAddr,
                             VIP_NET_ADDRESS* RemoteAddr, VIP_ULONG Timeout,
                             VIP_VI_ATTRIBUTES* RemoteViAttributes);
VIP_RETURN VipDisconnect(VIP_VI_HANDLE ViHandle);

/* ---- Connections (peer to peer) -------------------------------------------------------------
 * Each side asks for the other (its own address and discriminator, the peer's); the connection
 * is made when the two requests meet, whichever came first. VipConnectPeerRequest returns at
 * once; VipConnectPeerDone answers VIP_NOT_DONE until the connection is made, VipConnectPeerWait
 * waits for it; both answer VIP_TIMEOUT once Timeout has passed since the request. VipDisconnect
 * withdraws a request not yet met. */
VIP_RETURN VipConnectPeerRequest(VIP_VI_HANDLE ViHandle, VIP_NET_ADDRESS* LocalAddr,
                                 VIP_NET_ADDRESS* RemoteAddr, VIP_ULONG Timeout);
VIP_RETURN VipConnectPeerDone(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES* RemoteViAttributes);
VIP_RETURN VipConnectPeerWait(VIP_VI_HANDLE ViHandle, VIP_VI_ATTRIBUTES* RemoteViAttributes);

/* ---- Completion queues ---------------------------------------------------------------------- */
VIP_RETURN VipCreateCQ(VIP_NIC_HANDLE NicHandle, VIP_ULONG EntryCount, VIP_CQ_HANDLE* CQHandle);
VIP_RETURN VipDestroyCQ(VIP_CQ_HANDLE CQHandle);
/* A CQ never loses a completion: one that finds EntryCount reached waits its turn. Resizing
 * below the entries queued is VIP_INVALID_PARAMETER. */
VIP_RETURN VipResizeCQ(VIP_CQ_HANDLE CQHandle, VIP_ULONG EntryCount);
VIP_RETURN VipCQDone(VIP_CQ_HANDLE CQHandle, VIP_VI_HANDLE* ViHandle, VIP_BOOLEAN* RecvQueue);
VIP_RETURN VipCQWait(VIP_CQ_HANDLE CQHandle, VIP_ULONG Timeout, VIP_VI_HANDLE* ViHandle,
                     VIP_BOOLEAN* RecvQueue);

/* ---- Notification ----------------------------------------------------------------------------
 * Each call asks for one call of Handler, on a thread of the provider, once the queue (or the CQ)
 * has a completion: the descriptor (or the CQ entry) is taken off as by VipSendDone, VipRecvDone
 * or VipCQDone and handed to Handler. Several calls are answered in the order made. Destroying
 * the VI or CQ, or closing the NIC, drops the calls not yet answered. */
typedef void (*VIP_VI_NOTIFY_HANDLER)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle,
                                      VIP_VI_HANDLE ViHandle, VIP_DESCRIPTOR* DescriptorPtr);
typedef void (*VIP_CQ_NOTIFY_HANDLER)(VIP_PVOID Context, VIP_NIC_HANDLE NicHandle,
                                      VIP_VI_HANDLE ViHandle, VIP_BOOLEAN RecvQueue);
VIP_RETURN VipSendNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, VIP_VI_NOTIFY_HANDLER Handler);
VIP_RETURN VipRecvNotify(VIP_VI_HANDLE ViHandle, VIP_PVOID Context, VIP_VI_NOTIFY_HANDLER Handler);
VIP_RETURN VipCQNotify(VIP_CQ_HANDLE CQHandle, VIP_PVOID Context, VIP_CQ_NOTIFY_HANDLER Handler);

/* ---- Name service --------------------------------------------------------------------------- */
/* NSInitInfo: NULL, or the path of a hosts file of "<name> <NIC chip id>" lines (# comments).
 * VipNSGetHostByName looks a name up in that file, else among the fabric's names for its NICs
 * (chip id, nic:<index>, the NIC's name, its NodeDescription or GUID: glex_resolve_nic); the
 * address is the NIC's connection manager (VP 7), with DiscriminatorLen 0. VipNSGetHostByAddr is
 * the reverse: the file's name for the address's NIC (the first in byte order), else the
 * fabric's. *NameLen is Name's size in bytes, and comes back as the name's length with its NUL;
 * a name that does not fit is VIP_INVALID_PARAMETER, with *NameLen set to what it needs. */
VIP_RETURN VipNSInit(VIP_NIC_HANDLE NicHandle, VIP_PVOID NSInitInfo);
VIP_RETURN VipNSGetHostByName(VIP_NIC_HANDLE NicHandle, VIP_CHAR* Name, VIP_NET_ADDRESS* Address,
                              VIP_ULONG NameIndex);
VIP_RETURN VipNSGetHostByAddr(VIP_NIC_HANDLE NicHandle, VIP_NET_ADDRESS* Address, VIP_CHAR* Name,
                              VIP_ULONG* NameLen);
VIP_RETURN VipNSShutdown(VIP_NIC_HANDLE NicHandle);

/* The text of a return code, and of the last error on this thread naming the call, the field
 * and the value (Galaxy extensions, as glex_last_error). */
const char* VipErrorString(VIP_RETURN Ret);
const char* VipLastError(void);

#ifdef __cplusplus
}
#endif

#endif /* VIA_H */
